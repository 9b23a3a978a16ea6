package main

import (
	"github.com/gitfleet/gitfleet/internal/alert"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/fullnode"
)

// alertConfig is the full node's alerts, from the --alert settings.
func alertConfig(cfg config.Config) fullnode.AlertConfig {
	th := alert.DefaultThresholds()
	th.Hold, th.FailingShare, th.StaleShare, th.NoSession = cfg.AlertFor, cfg.AlertFailingShare, cfg.AlertStaleShare, cfg.AlertNoSession
	return fullnode.AlertConfig{URLs: cfg.Alert, Interval: cfg.AlertInterval, StaleAfter: cfg.AlertStaleAfter, Thresholds: th}
}
