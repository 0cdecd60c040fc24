// Package face_test holds hongbao's end-to-end tests of the faces in a
// real browser (headless Chromium through chromedp): the red-packet page
// served by the router and the operators' dashboard, over a whole cluster.
package face_test
