package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// requestTimeout bounds a request, ?wait= long polls (at most 60 s)
// included; the event stream has none.
const requestTimeout = 90 * time.Second

// unavailableWait bounds how long a call waits out 503 answers that say
// when to come back (Retry-After): a full node whose session with its
// coordinator is not up yet, just after it started, answers writes so.
const unavailableWait = 30 * time.Second

// client calls the API.
type client struct {
	base, token string
	http        *http.Client
}

func newClient(server, token string) *client {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	return &client{base: strings.TrimSuffix(server, "/"), token: token, http: &http.Client{}}
}

// apiError is an answer other than 2xx.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status) }

// call sends a request and returns the answer's status and body; an
// answer other than 2xx is an *apiError with the server's message.
//
// A 503 with Retry-After (the server is up but not ready: say, a full node
// that has just started) is waited out and tried again, for up to unavailableWait
// in all, as a client of an HTTP API should; any other answer is final.
func (c *client) call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
	}
	waited := time.Duration(0)
	for {
		status, data, after, err := c.once(ctx, method, path, payload)
		if status != http.StatusServiceUnavailable || after <= 0 || waited+after > unavailableWait {
			return status, data, err
		}
		t := time.NewTimer(after)
		select {
		case <-ctx.Done():
			t.Stop()
			return status, data, err
		case <-t.C:
		}
		waited += after
	}
}

// once sends one request; after is the answer's Retry-After (0: none).
func (c *client) once(ctx context.Context, method, path string, payload []byte) (status int, data []byte, after time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" { // reads too: the operator sees error details
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("cannot reach the server: %w", err)
	}
	defer resp.Body.Close()
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		after = time.Duration(secs) * time.Second
	}
	data, err = io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, after, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, data, after, answerError(resp.StatusCode, data)
	}
	return resp.StatusCode, data, after, nil
}

func answerError(status int, data []byte) error {
	var e struct{ Error string }
	if json.Unmarshal(data, &e) != nil || e.Error == "" {
		e.Error = http.StatusText(status)
	}
	if status == http.StatusUnauthorized {
		e.Error += " (give the API token with --token, GITFLEET_TOKEN or the config file)"
	}
	return &apiError{Status: status, Message: e.Error}
}

// getJSON GETs path and decodes the answer into v, returning the raw JSON.
func (c *client) getJSON(ctx context.Context, path string, v any) ([]byte, error) {
	_, data, err := c.call(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("GET %s: unexpected answer: %w", path, err)
	}
	return data, nil
}

// repoPath is the API path of a repository key, each segment escaped.
func repoPath(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/api/v1/repos/" + strings.Join(segs, "/")
}

// keyArg accepts a key or any URL of the repository.
func keyArg(s string) string {
	if strings.Contains(s, "://") || strings.Contains(s, "@") {
		if key, _, err := repokey.Normalize(s, repokey.Options{AllowPrivate: true}); err == nil {
			return key.String()
		}
	}
	return s
}
