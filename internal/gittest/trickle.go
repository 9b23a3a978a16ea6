package gittest

import (
	"net"
	"time"
)

// TrickleBody plays a client that takes for ever to send a request body:
// it writes one byte to conn every `every` until stop is closed or a write
// fails. Run it in its own goroutine after writing the request's head.
func TrickleBody(conn net.Conn, every time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}
}
