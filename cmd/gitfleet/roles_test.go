package main

import "testing"

func TestParseHostLimits(t *testing.T) {
	got, err := parseHostLimits([]string{"GitHub.com=5000/h", "gitee.com=600"})
	if err != nil || got["github.com"] != 5000 || got["gitee.com"] != 600 {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"github.com", "=5/h", "github.com=-1/h", "github.com=many/h"} {
		if _, err := parseHostLimits([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
