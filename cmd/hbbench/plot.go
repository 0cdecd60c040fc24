package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

var palette = []color.RGBA{{200, 30, 30, 255}, {30, 90, 200, 255}, {30, 150, 60, 255}, {150, 60, 170, 255}, {220, 140, 0, 255}}

// drawPlot writes a PNG of opens/s (y, log scale) against clients (x, log
// scale), one line per design.
func drawPlot(path string, clients []int, designs []string, series map[string][]float64) error {
	const w, h, left, right, top, bottom = 900, 560, 80, 170, 40, 60
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	fill(img, img.Bounds(), color.RGBA{255, 255, 255, 255})
	ymax := 10.0
	for _, s := range series {
		for _, v := range s {
			ymax = math.Max(ymax, v)
		}
	}
	ymax = math.Pow(10, math.Ceil(math.Log10(ymax)))
	ymin := 10.0
	xmin, xmax := math.Log10(float64(clients[0])), math.Log10(float64(clients[len(clients)-1]))
	if xmax == xmin {
		xmax = xmin + 1
	}
	px := func(c int) int { return left + int((math.Log10(float64(c))-xmin)/(xmax-xmin)*float64(w-left-right)) }
	py := func(v float64) int {
		v = math.Max(v, ymin)
		return h - bottom - int((math.Log10(v)-math.Log10(ymin))/(math.Log10(ymax)-math.Log10(ymin))*float64(h-top-bottom))
	}
	grey := color.RGBA{200, 200, 200, 255}
	black := color.RGBA{0, 0, 0, 255}
	for y := ymin; y <= ymax; y *= 10 {
		line(img, left, py(y), w-right, py(y), grey)
		label(img, 8, py(y)+4, fmt.Sprintf("%g", y), black)
	}
	for _, c := range clients {
		line(img, px(c), top, px(c), h-bottom, grey)
		label(img, px(c)-10, h-bottom+18, fmt.Sprint(c), black)
	}
	line(img, left, h-bottom, w-right, h-bottom, black)
	line(img, left, top, left, h-bottom, black)
	label(img, left, 24, "hot packet: opens/s by concurrent clients (log-log)", black)
	label(img, w/2-40, h-12, "clients", black)
	for i, d := range designs {
		c := palette[i%len(palette)]
		s := series[d]
		for j := 1; j < len(s); j++ {
			thick(img, px(clients[j-1]), py(s[j-1]), px(clients[j]), py(s[j]), c)
		}
		for j := range s {
			fill(img, image.Rect(px(clients[j])-3, py(s[j])-3, px(clients[j])+4, py(s[j])+4), c)
		}
		fill(img, image.Rect(w-right+15, top+20*i, w-right+35, top+20*i+6), c)
		label(img, w-right+40, top+20*i+8, d, black)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// line draws with Bresenham's algorithm.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func thick(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	for d := -1; d <= 1; d++ {
		line(img, x0, y0+d, x1, y1+d, c)
	}
}

func label(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func abs(v int) int { return max(v, -v) }

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}
