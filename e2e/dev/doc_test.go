// Package dev_test holds hongbao's end-to-end tests of the dev cluster end
// to end: make up, kill -9 of every kind of process and its restart, the
// reseed of a replica, a failover, make down leaving nothing running.
package dev_test
