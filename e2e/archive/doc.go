// Package archive holds the whole-system tests of archiving: the real
// hbarchive binary against a private MariaDB (exit codes, a run stopped
// between copy and purge and its rerun), and a young archived packet that
// still answers its openers through a cluster.
package archive
