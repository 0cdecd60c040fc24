package sqldb

import "strings"

// Placeholders is n copies of one, comma separated: the value list of an
// IN (...) or a multi-row INSERT ("?", "(?,?,?)"). n must be positive.
func Placeholders(n int, one string) string {
	return strings.Repeat(one+",", n-1) + one
}
