package main

import (
	"github.com/gitfleet/gitfleet/internal/alert"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/node"
)

// alertConfig is the full node's alerts, from the --alert settings.
func alertConfig(cfg config.Config) node.AlertConfig {
	th := alert.DefaultThresholds()
	th.Hold, th.FailingShare, th.StaleShare, th.NoSession = cfg.AlertFor, cfg.AlertFailingShare, cfg.AlertStaleShare, cfg.AlertNoSession
	return node.AlertConfig{URLs: cfg.Alert, Interval: cfg.AlertInterval, StaleAfter: cfg.AlertStaleAfter, Thresholds: th}
}
