package gitcmd

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// An upstream that throttles (429, 503) may say when to come back in a
// Retry-After header. git shows no header in its messages, so the commands
// that talk to upstreams write curl's trace of the headers (no data, and
// git redacts credentials in it) to a file of their own, read only when
// the command failed as throttled, and removed at once.

// networkCommands are the subcommands that fetch over http(s).
var networkCommands = map[string]bool{"fetch": true, "ls-remote": true, "clone": true}

// maxTraceRead bounds what is read of a trace: the throttled answer is
// the last one, at the end.
const maxTraceRead = 64 << 10

// beginTrace makes a trace file in dir ("": os.TempDir()) for a command
// named name, if it talks to upstreams: the environment that points git at
// it, and a function that returns the trace's last Retry-After (0 if none)
// when throttled and removes the file.
func beginTrace(name, dir string) ([]string, func(throttled bool) time.Duration) {
	none := func(bool) time.Duration { return 0 }
	if !networkCommands[name] {
		return nil, none
	}
	f, err := os.CreateTemp(dir, "gitfleet-curl-trace-")
	if err != nil {
		return nil, none // only a hint is lost
	}
	path := f.Name()
	f.Close()
	end := func(throttled bool) time.Duration {
		defer os.Remove(path)
		if !throttled {
			return 0
		}
		d, _ := readRetryAfter(path, time.Now())
		return d
	}
	return []string{"GIT_TRACE_CURL=" + path, "GIT_TRACE_CURL_NO_DATA=1"}, end
}

func readRetryAfter(path string, now time.Time) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxTraceRead {
		if _, err := f.Seek(-maxTraceRead, io.SeekEnd); err != nil {
			return 0, err
		}
	}
	return lastRetryAfter(f, now)
}

// lastRetryAfter reads a curl trace of git (GIT_TRACE_CURL) and returns
// the wait that the last Retry-After header received asks for, 0 if none.
func lastRetryAfter(r io.Reader, now time.Time) (time.Duration, error) {
	const mark = "<= Recv header: "
	var last time.Duration
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxTraceRead)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, mark)
		if i < 0 {
			continue
		}
		name, value, ok := strings.Cut(line[i+len(mark):], ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "Retry-After") {
			continue
		}
		if d, ok := ParseRetryAfter(value, now); ok {
			last = d
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return last, err
	}
	return last, nil
}

// ParseRetryAfter reads a Retry-After value (RFC 9110, 10.2.3): a number
// of seconds, or an HTTP date, taken against now. A date in the past is a
// wait of 0; anything else is not understood (false).
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// RetryAfterOf returns the wait a throttling upstream asked for in the
// failure err, 0 if it asked for none.
func RetryAfterOf(err error) time.Duration {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.RetryAfter
	}
	return 0
}
