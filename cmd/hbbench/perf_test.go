package main

import (
	"strings"
	"testing"
)

func TestPerfPart(t *testing.T) {
	for _, tc := range []struct{ sym, dso, want string }{
		{"finish_task_switch.isra.0", "([kernel.kallsyms])", partKernel},
		{"__memmove_avx_unaligned_erms", "(/usr/lib/x86_64-linux-gnu/libc.so.6)", partLibc},
		{"[unknown]", "(/usr/sbin/mariadbd)", partUnresolved},
		{"MYSQLparse", "(/usr/sbin/mariadbd)", partParser},
		{"Lex_input_stream::lex_one_token", "(/usr/sbin/mariadbd)", partParser},
		{"Lex_input_stream::scan_ident_middle", "(/usr/sbin/mariadbd)", partParser},
		{"mysql_execute_command", "(/usr/sbin/mariadbd)", partNamed},
		{"Item::cleanup", "(/usr/sbin/mariadbd)", partNamed},
	} {
		if got := perfPart(tc.sym, tc.dso); got != tc.want {
			t.Errorf("perfPart(%q, %q) = %q, want %q", tc.sym, tc.dso, got, tc.want)
		}
	}
}

// perf script -F pid,ip,sym,dso, as perf 6.1 prints it.
const perfScriptOut = `11468      5620893a84f7 [unknown] (/usr/sbin/mariadbd)
11287      5620893a0000 MYSQLparse (/usr/sbin/mariadbd)
11287  ffffffff813a2413 finish_task_switch.isra.0 ([kernel.kallsyms])
11287      5620893a1111 Type_handler_hybrid_field_type::aggregate_for_comparison(Type_handler const*) (/usr/sbin/mariadbd)
11287      7f00000000aa __memcmp_avx2_movbe (/usr/lib/x86_64-linux-gnu/libc.so.6)
11817            4c9691 context.(*valueCtx).Err (/work/main/.run/prof/bin/hbserver)
11287      5620893a84f7 [unknown] (/usr/sbin/mariadbd)
`

func TestReadPerfScript(t *testing.T) {
	got, err := readPerfScript(strings.NewReader(perfScriptOut), map[string]string{"11287": "mariadb-a", "11468": "mariadb-a-replica"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int{
		"mariadb-a":         {partParser: 1, partKernel: 1, partNamed: 1, partLibc: 1, partUnresolved: 1},
		"mariadb-a-replica": {partUnresolved: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("processes %v, want %v (the server's sample is no MariaDB's)", got, want)
	}
	for name, parts := range want {
		for part, n := range parts {
			if got[name][part] != n {
				t.Errorf("%s %s: %d samples, want %d (all: %v)", name, part, got[name][part], n, got[name])
			}
		}
	}
}

func TestWritePerf(t *testing.T) {
	// 997 samples of one process in 1 s at 1,000 requests/s: 1,000 us of
	// CPU per request.
	p := &perfProfile{row: "open", conns: 256, secs: 1, samples: map[string]map[string]int{
		"mariadb-a":    {partKernel: 499, partUnresolved: 498},
		"mariadb-core": {partParser: 997},
	}, rate: 1000}
	var b strings.Builder
	writePerf(&b, p)
	want := `
### MariaDB during the open row at 256 connections (perf record -F 997, 1 s of its first round)

| process | CPU us per request | kernel | parser and lexer | SQL layer (named) | unresolved (InnoDB, mostly) | libc |
|---|---|---|---|---|---|---|
| mariadb-a | 1000 | 50% | 0% | 0% | 50% | 0% |
| mariadb-core | 1000 | 0% | 100% | 0% | 0% | 0% |
| all | 2000 | | | | | |
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
