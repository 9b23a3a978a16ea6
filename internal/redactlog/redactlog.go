// Package redactlog keeps credentials out of logs: a slog.Handler that
// passes every message and attribute through repokey.Redact before the
// handler it wraps sees them, so that a URL with a password or a forge
// token in it, wherever it comes from (a catalog line, an error of git, an
// operator's flag), is written as REDACTED.
package redactlog

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Handler wraps a slog.Handler.
type Handler struct {
	next slog.Handler
}

// New returns a Handler that redacts and then hands records to next.
func New(next slog.Handler) *Handler { return &Handler{next: next} }

// Enabled is next's.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle redacts r's message and attributes and hands it on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, repokey.Redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redact(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs redacts attrs once, as they are attached.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = redact(a)
	}
	return &Handler{next: h.next.WithAttrs(red)}
}

// WithGroup is next's.
func (h *Handler) WithGroup(name string) slog.Handler { return &Handler{next: h.next.WithGroup(name)} }

func redact(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); repokey.Redact(s) != s {
			return slog.String(a.Key, repokey.Redact(s))
		}
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = redact(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case fmt.Stringer:
			s = x.String()
		default:
			return slog.Attr{Key: a.Key, Value: v}
		}
		if r := repokey.Redact(s); r != s {
			return slog.String(a.Key, r)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
