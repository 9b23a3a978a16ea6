package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/alert"
	"github.com/gitfleet/gitfleet/internal/alert/alerttest"
)

// TestAlertsReachEveryReceiver kills a partial node of a real fleet so that
// it goes past its grace (5 s), and checks that the full node's alert
// reaches a webhook receiver and an SMTP server on 127.0.0.1 once, and,
// when the node is back, its resolution once.
func TestAlertsReachEveryReceiver(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	hook := alerttest.StartHTTP(t, nil)
	mail := alerttest.StartSMTP(t, alerttest.SMTPOptions{})
	f := newFleet(t)
	f.seed(seq(0, 4), "4 repositories")
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr, "--public-url", f.base,
		"--alert", hook.URL+"/gitfleet-alerts",
		"--alert", "smtp://"+mail.Addr+"?from=gitfleet@example.org&to=ops@example.org",
		"--alert-interval", "500ms")
	f.startNode("partial-1", "partial")
	f.startNode("partial-2", "partial")

	var victim uint32
	eventually(t, 60*time.Second, "three nodes alive", func() error {
		nodes, err := apiNodes(f.base)
		if err != nil {
			return err
		}
		alive := 0
		for _, n := range nodes {
			if n.State == "alive" {
				alive++
			}
			if n.Name == "partial-1" {
				victim = n.ID
			}
		}
		if alive != 3 || victim == 0 {
			return fmt.Errorf("nodes %+v", nodes)
		}
		return nil
	})
	key := fmt.Sprintf("%s/%d", alert.RuleNodeGone, victim)

	// counts is how many firings and resolutions of key each receiver got.
	counts := func() (hookFired, hookResolved, mailFired, mailResolved int) {
		for _, r := range hook.Requests() {
			var b alert.WebhookBody
			if err := json.Unmarshal(r.Body, &b); err != nil {
				t.Fatalf("webhook body %s: %v", r.Body, err)
			}
			if b.Key != key {
				continue
			}
			if !strings.HasPrefix(b.Console, f.base+"/-/") || !strings.Contains(b.Summary, "partial-1") || b.Threshold != "grace 5s" {
				t.Errorf("webhook message: %+v", b)
			}
			switch b.Status {
			case alert.Firing:
				hookFired++
			case alert.Resolved:
				hookResolved++
			}
		}
		for _, m := range mail.Mails() {
			switch {
			case strings.Contains(m.Data, "X-Gitfleet-Alert: "+key+" firing\r\n"):
				mailFired++
			case strings.Contains(m.Data, "X-Gitfleet-Alert: "+key+" resolved\r\n"):
				mailResolved++
			}
		}
		return
	}

	f.procs["partial-1"].kill()
	eventually(t, 60*time.Second, "the node-gone alert at the webhook and by mail", func() error {
		if hf, _, mf, _ := counts(); hf == 0 || mf == 0 {
			return fmt.Errorf("webhook %d, mail %d", hf, mf)
		}
		return nil
	})
	evaluated(t, f.base, 4) // four more evaluations: nothing more may come
	if fired, resolved := logged(f.procs["full"], key); fired != 1 || resolved != 0 {
		t.Fatalf("while the node is gone, the full node's log tells the alert fired %d times and resolved %d times; want 1 firing", fired, resolved)
	}
	if hf, hr, mf, mr := counts(); hf != 1 || mf != 1 || hr != 0 || mr != 0 {
		t.Fatalf("while the node is gone: webhook %d fired %d resolved, mail %d fired %d resolved; want 1 firing each", hf, hr, mf, mr)
	}

	f.startNode("partial-1", "partial") // the same data directory: the same node comes back
	eventually(t, 60*time.Second, "the resolution at the webhook and by mail", func() error {
		if _, hr, _, mr := counts(); hr == 0 || mr == 0 {
			return fmt.Errorf("webhook %d, mail %d", hr, mr)
		}
		return nil
	})
	evaluated(t, f.base, 4)
	if fired, resolved := logged(f.procs["full"], key); fired != 1 || resolved != 1 {
		t.Fatalf("after the node came back, the full node's log tells the alert fired %d times and resolved %d times; want 1 and 1", fired, resolved)
	}
	if hf, hr, mf, mr := counts(); hf != 1 || mf != 1 || hr != 1 || mr != 1 {
		t.Fatalf("after the node came back: webhook %d fired %d resolved, mail %d fired %d resolved; want 1 and 1 each", hf, hr, mf, mr)
	}
	for _, m := range mail.Mails() {
		if strings.Contains(m.Data, key) && (m.From != "gitfleet@example.org" || len(m.To) != 1 || m.To[0] != "ops@example.org") {
			t.Errorf("mail from %s to %v", m.From, m.To)
		}
	}
}

// evaluated waits until the full node at base has evaluated its alert rules
// n more times: what they decided is in its log (logged says how many
// times an alert fired or resolved), and their deliveries, queued then, had
// the evaluations after theirs to come.
func evaluated(t *testing.T, base string, n int) {
	t.Helper()
	count := func() (float64, error) {
		fams, err := scrape(base + "/metrics")
		if err != nil {
			return 0, err
		}
		v, ok := sample(fams, "gitfleet_alert_evaluations_total")
		if !ok {
			return 0, fmt.Errorf("no gitfleet_alert_evaluations_total")
		}
		return v, nil
	}
	from, err := count()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, fmt.Sprintf("%d more evaluations of the alert rules", n), func() error {
		v, err := count()
		if err != nil {
			return err
		}
		if v < from+float64(n) {
			return fmt.Errorf("%v evaluations, want %v", v, from+float64(n))
		}
		return nil
	})
}

// logged is how many times p's log says the alert key fired and resolved.
func logged(p *proc, key string) (fired, resolved int) {
	return p.count(`msg="alert firing" alert=` + key + " "), p.count(`msg="alert resolved" alert=` + key + " ")
}
