package ha

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gitfleet/gitfleet/internal/etcdtest"
	"github.com/gitfleet/gitfleet/internal/store"
)

func dialTest(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Dial(ctx, []string{endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestDialSaysWhenEtcdDoesNotAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A port nothing listens on.
	_, err := Dial(ctx, []string{"http://127.0.0.1:1"}, nil)
	if err == nil {
		t.Fatal("dialed an etcd that is not there")
	}
	if _, err := Dial(ctx, nil, nil); err == nil {
		t.Error("no endpoint was accepted")
	}
}

// One leader at a time: the second candidate waits, learns who leads, and
// takes over when the first resigns; the first's store is then fenced.
func TestOneLeaderAtATimeAndTheOldOneIsFenced(t *testing.T) {
	etcd := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bClient := dialTest(t, etcd.Endpoint)
	a := NewElector(dialTest(t, etcd.Endpoint), "/t1", 10*time.Second, "a:7070")
	b := NewElector(bClient, "/t1", 10*time.Second, "b:7070")

	if leader, err := b.Leader(ctx); err != nil || leader != "" {
		t.Fatalf("before any election: leader %q, %v", leader, err)
	}
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ta.Store().Put(ctx, "meta", "owner", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if leader, err := b.Leader(ctx); err != nil || leader != "a:7070" {
		t.Fatalf("b sees leader %q, %v; want a:7070", leader, err)
	}

	won := make(chan *Term, 1)
	go func() {
		tb, err := b.Campaign(ctx)
		if err != nil {
			t.Error(err)
		}
		won <- tb
	}()
	// b campaigns once its key is beside a's: from then on it waits.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		resp, err := bClient.Get(ctx, b.electionPrefix()+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d candidates' keys after a minute, want a's and b's", resp.Count)
		}
	}
	select {
	case <-won:
		t.Fatal("b was elected while a leads")
	case <-time.After(500 * time.Millisecond):
	}
	old := ta.Store()
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	var tb *Term
	select {
	case tb = <-won:
	case <-time.After(20 * time.Second):
		t.Fatal("b was not elected after a resigned")
	}
	if tb == nil {
		t.FailNow()
	}
	defer tb.Resign(context.Background())
	if leader, _ := a.Leader(ctx); leader != "b:7070" {
		t.Errorf("leader %q, want b:7070", leader)
	}
	// The new leader sees what the old one wrote; the old one can no longer write.
	if v, ok, err := tb.Store().Get(ctx, "meta", "owner"); err != nil || !ok || string(v) != "a" {
		t.Errorf("b reads owner %q %v %v, want a", v, ok, err)
	}
	if err := old.Put(ctx, "meta", "owner", []byte("a again")); !errors.Is(err, ErrFenced) {
		t.Errorf("a write of the resigned leader: %v, want ErrFenced", err)
	}
	if v, _, _ := tb.Store().Get(ctx, "meta", "owner"); string(v) != "a" {
		t.Errorf("owner %q after the fenced write, want a", v)
	}
}

// A leader whose lease runs out (it stopped answering) learns it through
// Done, and its writes are refused; another candidate is elected.
func TestLeaseLostEndsTheTerm(t *testing.T) {
	etcd := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := dialTest(t, etcd.Endpoint)
	a := NewElector(client, "/t2", 10*time.Second, "a:7070")
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// What etcd does to a leader that went silent: its lease is gone.
	if _, err := client.Revoke(ctx, ta.sess.Lease()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ta.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the term did not end when its lease was revoked")
	}
	var st store.Store = ta.Store()
	if err := st.Put(ctx, "meta", "k", []byte("v")); !errors.Is(err, ErrFenced) {
		t.Errorf("write after the lease was lost: %v, want ErrFenced", err)
	}
	b := NewElector(dialTest(t, etcd.Endpoint), "/t2", 10*time.Second, "b:7070")
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	tb, err := b.Campaign(cctx)
	if err != nil {
		t.Fatalf("b not elected after a's lease was lost: %v", err)
	}
	if err := tb.Store().Put(ctx, "meta", "k", []byte("b")); err != nil {
		t.Errorf("the new leader cannot write: %v", err)
	}
	_ = tb.Resign(ctx)
}

// Fleets under different prefixes elect their own leaders.
func TestPrefixesAreSeparateFleets(t *testing.T) {
	etcd := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := dialTest(t, etcd.Endpoint)
	t1, err := NewElector(client, "/fleet-1", 10*time.Second, "x:1").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Resign(ctx)
	t2, err := NewElector(client, "/fleet-2", 10*time.Second, "y:1").Campaign(ctx)
	if err != nil {
		t.Fatalf("a leader of /fleet-1 blocked /fleet-2: %v", err)
	}
	defer t2.Resign(ctx)
	if err := t1.Store().Put(ctx, "meta", "k", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := t2.Store().Get(ctx, "meta", "k"); ok {
		t.Error("one fleet's state is visible in another's")
	}
}

// A leader cut off from etcd hears no renewal of its lease: its term ends
// by itself, within the lease, so that it stops directing nodes before a
// successor can be elected.
func TestLeaderCutOffFromEtcdStepsDown(t *testing.T) {
	etcd := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	term, err := NewElector(dialTest(t, etcd.Endpoint), "/t4", 3*time.Second, "a:7070").Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-term.Done():
		t.Fatal("the term ended while etcd was up")
	case <-time.After(4 * time.Second): // longer than the lease: renewals keep it
	}
	etcd.Stop()
	cut := time.Now()
	select {
	case <-term.Done():
		t.Logf("stepped down %v after etcd went away (lease 3s)", time.Since(cut).Round(10*time.Millisecond))
	case <-time.After(15 * time.Second):
		t.Fatal("a leader cut off from etcd still leads")
	}
	// The etcd client gives the lease up only a whole lease after its last
	// renewal, when etcd may already have elected another leader: the term
	// must end before that.
	select {
	case <-term.sess.Done():
		t.Error("the term ended only when the etcd client gave the lease up")
	default:
	}
}
