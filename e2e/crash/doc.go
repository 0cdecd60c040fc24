// Package crash holds the tests that start a real hbserver and hurt it: a
// kill -9 while opens are in flight and the restart (every open answered
// is in MySQL), a SIGTERM that turns it not ready and then drains, and a
// server cut off from the meta database that turns not ready and back.
package crash
