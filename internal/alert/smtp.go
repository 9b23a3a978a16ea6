package alert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"mime"
	"net"
	"net/smtp"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/egress"
)

// send delivers e as one email: through the egress dialer, over implicit
// TLS (smtps) or with STARTTLS when the server offers it, with PLAIN
// authentication when the URL has a user (net/smtp sends a password only
// over TLS, or to a server on the loopback).
func (m *mailTarget) send(ctx context.Context, d *egress.Dialer, roots *x509.CertPool, e Event, console string, now time.Time) error {
	addr := net.JoinHostPort(m.host, m.port)
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("smtp %s: %w", addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	tlsConf := &tls.Config{ServerName: m.host, RootCAs: roots, MinVersion: tls.VersionTLS12}
	if m.implicitTLS {
		tc := tls.Client(conn, tlsConf)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("smtps %s: TLS: %w", addr, err)
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, m.host)
	if err != nil {
		return fmt.Errorf("smtp %s: greeting: %w", addr, err)
	}
	defer c.Close()
	if !m.implicitTLS {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsConf); err != nil {
				return fmt.Errorf("smtp %s: STARTTLS: %w", addr, err)
			}
		}
	}
	if m.user != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return fmt.Errorf("smtp %s: the URL has a user but the server offers no AUTH", addr)
		}
		if err := c.Auth(smtp.PlainAuth("", m.user, m.pass, m.host)); err != nil {
			return fmt.Errorf("smtp %s: AUTH: %w", addr, err)
		}
	}
	if err := c.Mail(m.from); err != nil {
		return fmt.Errorf("smtp %s: MAIL FROM: %w", addr, err)
	}
	for _, to := range m.to {
		if err := c.Rcpt(to); err != nil {
			return fmt.Errorf("smtp %s: RCPT TO %s: %w", addr, to, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp %s: DATA: %w", addr, err)
	}
	if _, err := w.Write(mailMessage(m.from, m.to, e, console, now)); err != nil {
		return fmt.Errorf("smtp %s: message: %w", addr, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp %s: message: %w", addr, err)
	}
	if err := c.Quit(); err != nil {
		return fmt.Errorf("smtp %s: QUIT: %w", addr, err)
	}
	return nil
}

// headerSafe removes what would end a header line: a summary can carry a
// volunteer's node name.
var headerSafe = strings.NewReplacer("\r", " ", "\n", " ")

// mailMessage is e as an RFC 5322 message (net/smtp's writer ends its
// lines in CRLF and escapes leading dots).
func mailMessage(from string, to []string, e Event, console string, now time.Time) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\n", from)
	fmt.Fprintf(&b, "To: %s\n", strings.Join(to, ", "))
	fmt.Fprintf(&b, "Subject: %s\n", mime.QEncoding.Encode("utf-8", headerSafe.Replace(e.Subject())))
	fmt.Fprintf(&b, "Date: %s\n", now.UTC().Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: <%s@gitfleet.alert>\n", e.ID())
	fmt.Fprintf(&b, "X-Gitfleet-Alert: %s %s\n", headerSafe.Replace(e.Key), e.Status)
	b.WriteString("MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n")
	b.WriteString(e.Text(console))
	return []byte(b.String())
}
