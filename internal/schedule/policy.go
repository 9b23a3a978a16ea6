package schedule

import (
	"math"
	"time"
)

// policy is the part of the scheduler that differs between policies: when
// a repository is due again, and in which order due repositories go.
// Failure backoff, lanes, budget, host limits and MaxInterval are the
// scheduler's, the same for every policy.
type policy interface {
	// add sets up the policy's state for a repository being added with st.
	add(r *repo, st RepoState, now time.Time)
	// first returns the usual interval of a repository just added, over
	// which its first background check is spread.
	first(r *repo, now time.Time) time.Duration
	// next returns when r is due again after a check with outcome o; r's
	// counters already include o.
	next(r *repo, now time.Time, o Outcome) time.Time
	// push tells the policy that r's upstream was pushed at at, as a
	// forge's feed reports it; checked is true when a successful check
	// made after at has already seen that push.
	push(r *repo, at, now time.Time, checked bool)
	// remove forgets r.
	remove(r *repo)
	// repoFed tells the policy that r.fed() changed, before the
	// scheduler reschedules it (calling first when it stops being fed).
	repoFed(r *repo)
	// ranks is true when the policy orders due repositories by the
	// r.rank it sets; otherwise they go by due time.
	ranks() bool
}

func clampDuration(d, lo, hi time.Duration) time.Duration {
	return min(max(d, lo), hi)
}

// fixed checks every repository at the same interval, the one that spends
// the budget evenly: Len()/Budget hours, within [MinInterval, MaxInterval].
// Without a budget the interval is MinInterval.
type fixed struct{ s *Scheduler }

func (p fixed) interval() time.Duration {
	c := p.s.cfg
	if c.Budget == 0 {
		return c.MinInterval
	}
	iv := time.Duration(float64(p.s.live) / c.Budget * float64(time.Hour))
	return clampDuration(iv, c.MinInterval, c.MaxInterval)
}

func (fixed) add(*repo, RepoState, time.Time) {}

func (p fixed) first(*repo, time.Time) time.Duration { return p.interval() }

func (p fixed) next(_ *repo, now time.Time, _ Outcome) time.Time { return now.Add(p.interval()) }

func (fixed) remove(*repo) {}

func (fixed) repoFed(*repo) {}

func (fixed) push(*repo, time.Time, time.Time, bool) {}

func (fixed) ranks() bool { return false }

// Sourcegraph's rule (its repo-updater): the next check is due half the
// time since the last change after this one, within [45s, 8h]; an error
// doubles the last interval.
const (
	sourcegraphMin = 45 * time.Second
	sourcegraphMax = 8 * time.Hour
)

type sourcegraph struct{}

func (sourcegraph) interval(r *repo, now time.Time) time.Duration {
	if r.lastChange.IsZero() {
		return sourcegraphMax
	}
	return clampDuration(now.Sub(r.lastChange)/2, sourcegraphMin, sourcegraphMax)
}

func (sourcegraph) add(*repo, RepoState, time.Time) {}

func (p sourcegraph) first(r *repo, now time.Time) time.Duration {
	r.interval = p.interval(r, now)
	return r.interval
}

func (p sourcegraph) next(r *repo, now time.Time, o Outcome) time.Time {
	if o.Class == None {
		r.interval = p.interval(r, now)
	} else {
		r.interval = min(2*max(r.interval, sourcegraphMin), 2*sourcegraphMax)
	}
	return now.Add(r.interval)
}

func (sourcegraph) remove(*repo) {}

func (sourcegraph) repoFed(*repo) {}

func (sourcegraph) push(*repo, time.Time, time.Time, bool) {}

func (sourcegraph) ranks() bool { return false }

// compass is the seed design's rule (Compass-CI's git-mirror): every
// repository has a priority, the smallest is checked next, and each check
// adds to it a step that is small for a repository whose last commit is
// recent: cbrt(seconds since the last commit). A repository not cloned yet
// adds (clone failures+1)*cbrt(STEP_SECONDS); one with no known last
// commit, or one in the future, adds (fetch failures+1)*cbrt(STEP_SECONDS).
type compass struct{}

const compassStepSeconds = 2592000

func (compass) step(r *repo, now time.Time) float64 {
	unit := math.Cbrt(compassStepSeconds)
	switch {
	case !r.cloned:
		return float64(r.fails+1) * unit
	case r.lastChange.IsZero() || !now.After(r.lastChange):
		return float64(r.fails+1) * unit
	}
	return math.Cbrt(now.Sub(r.lastChange).Seconds())
}

func (p compass) add(r *repo, _ RepoState, now time.Time) { r.rank = p.step(r, now) }

func (compass) first(*repo, time.Time) time.Duration { return 0 }

func (p compass) next(r *repo, now time.Time, _ Outcome) time.Time {
	r.rank += p.step(r, now)
	return now
}

func (compass) remove(*repo) {}

func (compass) repoFed(*repo) {}

func (compass) push(*repo, time.Time, time.Time, bool) {}

func (compass) ranks() bool { return true }
