package config

import (
	"flag"
	"fmt"
)

// given collects the names of the settings the user gave, in the YAML file
// or as flags: a default that contradicts one of them must yield to it.
type given map[string]bool

// flagsGiven adds the flags fs parsed from the command line.
func (g given) flagsGiven(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) { g[f.Name] = true })
}

// minIntervalShare is the share of --max-interval that --min-interval
// defaults to when its own default (1m) would be longer than the maximum
// the user set.
const minIntervalShare = 4

// resolveIntervals makes the default of --min-interval or --max-interval
// yield to the other when the user set only one and the default would
// contradict it: `--max-interval 5s` alone gives a min interval of 5s/4,
// `--min-interval 48h` alone a max interval of 48h. Both set with the
// minimum longer than the maximum is an error.
func (c *Config) resolveIntervals(g given) error {
	if c.MinInterval <= c.MaxInterval || c.MaxInterval <= 0 {
		return nil
	}
	switch minSet, maxSet := g["min-interval"], g["max-interval"]; {
	case minSet && maxSet:
		return fmt.Errorf("config: --min-interval %v is longer than --max-interval %v: the shortest time between two checks of a repository must not exceed the longest", c.MinInterval, c.MaxInterval)
	case maxSet:
		c.MinInterval = min(Default().MinInterval, c.MaxInterval/minIntervalShare)
		if c.MinInterval <= 0 { // 0 would mean "the scheduler's default"
			c.MinInterval = c.MaxInterval
		}
	case minSet:
		c.MaxInterval = c.MinInterval
	default:
		// Two defaults in contradiction is a bug of Default, caught by the
		// scheduler's own check.
	}
	return nil
}
