package migrate

// SetBeforeCopy makes f run before each chunk m copies is read from the
// source, with the chunk's table name: a test's way into the window
// between a pass's digests and its copies.
func (m *Bucket) SetBeforeCopy(f func(table string)) { m.beforeCopy = f }
