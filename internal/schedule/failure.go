package schedule

import (
	"math/rand/v2"
	"time"

	"github.com/gitfleet/gitfleet/internal/backoff"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// FailureClass says why a check failed; each class has its own retry rule.
type FailureClass int

const (
	// None: the check succeeded.
	None FailureClass = iota
	// Transient: a network error or a timeout. Retried with exponential
	// backoff and jitter.
	Transient
	// NotFound: the upstream says the repository does not exist. Retried
	// like Transient; after GoneAfter in a row the repository is parked as
	// gone and rechecked once a day.
	NotFound
	// Auth: the upstream wants credentials. Long backoff.
	Auth
	// TLS: the certificate or handshake is bad. Long backoff.
	TLS
	// Disk: the node could not write. The node is unhealthy: background
	// checks stop until a check succeeds or ResetHealth is called, and the
	// repository that hit the full disk backs off like Auth (capped at
	// MaxInterval), so that it does not download again at every recovery.
	Disk
	// OverLimit: the repository is over an operator's limit (size, number
	// of refs). Checked again only after MaxInterval, or when it is asked
	// for urgently (a webhook, an on-demand check).
	OverLimit
	// Legal: the upstream answers HTTP 451, unavailable for legal reasons.
	// A takedown does not pass like a network error: the repository is
	// parked as gone at once and rechecked once a day.
	Legal
	numClasses
)

var classNames = [numClasses]string{"none", "transient", "notfound", "auth", "tls", "disk", "overlimit", "legal"}

func (c FailureClass) String() string {
	if c < 0 || c >= numClasses {
		return "unknown"
	}
	return classNames[c]
}

// Retry rules.
const (
	// GoneAfter is how many NotFound in a row park a repository as gone:
	// the count the coordinator reports it gone after too.
	GoneAfter = repostate.GoneAfter
	// GoneRecheck is how often a gone repository is checked again.
	GoneRecheck = 24 * time.Hour

	transientBase = time.Minute
	longBase      = time.Hour // Auth and TLS
	longCap       = 24 * time.Hour
	hostBase      = time.Minute // a throttling host
	hostCap       = time.Hour
)

// MaxRetryAfter bounds how long a throttling host's Retry-After can make
// it wait: a hostile or broken upstream cannot park a host for days.
const MaxRetryAfter = 6 * time.Hour

// jitteredBackoff returns base*2^(n-1), capped, with "equal jitter": a
// uniform draw from [d/2, d], so that repositories that failed together
// do not come back together. It is package backoff's rule, drawn from the
// scheduler's seeded source.
func jitteredBackoff(n int, base, limit time.Duration, rng *rand.Rand) time.Duration {
	return backoff.Jitter(backoff.Delay(n, base, limit), rng)
}

// retryDelay is how long a repository waits after its fails-th failure in
// a row of class c (fails >= 1).
func (s *Scheduler) retryDelay(c FailureClass, fails, notFound int) time.Duration {
	switch c {
	case NotFound:
		if notFound >= GoneAfter {
			return GoneRecheck
		}
		return jitteredBackoff(fails, transientBase, s.cfg.MaxInterval, s.rng)
	case Legal:
		return GoneRecheck
	case Auth, TLS:
		return jitteredBackoff(fails, longBase, longCap, s.rng)
	case Disk:
		return jitteredBackoff(fails, longBase, s.cfg.MaxInterval, s.rng)
	case OverLimit:
		return s.cfg.MaxInterval
	default:
		return jitteredBackoff(fails, transientBase, s.cfg.MaxInterval, s.rng)
	}
}
