package alert

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// ID names one event for receivers that want to drop a repeat (a delivery
// retried after the receiver took it but its answer was lost): the same
// alert's firing, or its resolution, always has the same ID.
func (e Event) ID() string {
	h := sha256.Sum256([]byte(e.Key + "\x00" + string(e.Status) + "\x00" + strconv.FormatInt(e.Since.UnixNano(), 10)))
	return hex.EncodeToString(h[:12])
}

// WebhookBody is what a generic webhook receives.
type WebhookBody struct {
	ID        string    `json:"id"`
	Status    Status    `json:"status"`
	Key       string    `json:"key"`
	Rule      string    `json:"rule"`
	Summary   string    `json:"summary"`
	Figure    string    `json:"figure"`
	Threshold string    `json:"threshold"`
	Since     time.Time `json:"since"`
	At        time.Time `json:"at"`
	Console   string    `json:"console,omitempty"`
	Text      string    `json:"text"`
}

func webhookPayload(e Event, console string) ([]byte, error) {
	return json.Marshal(WebhookBody{ID: e.ID(), Status: e.Status, Key: e.Key, Rule: e.Rule, Summary: e.Summary,
		Figure: e.Figure, Threshold: e.Threshold, Since: e.Since.UTC(), At: e.At.UTC(), Console: console, Text: e.Text(console)})
}

// slackEscape escapes what Slack's text treats as markup: node names come
// from volunteers, and "<!channel>" in one must not page a channel.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func slackPayload(e Event, console string) ([]byte, error) {
	return json.Marshal(map[string]string{"text": slackEscape.Replace(e.Text(console))})
}

type dingTalkText struct {
	MsgType string `json:"msgtype"`
	Text    struct {
		Content string `json:"content"`
	} `json:"text"`
}

func dingTalkPayload(e Event, console string) ([]byte, error) {
	var m dingTalkText
	m.MsgType = "text"
	m.Text.Content = e.Text(console)
	return json.Marshal(m)
}

// DingTalkSign is the signature of a DingTalk robot with a signing secret:
// base64 of HMAC-SHA256 under secret of the timestamp in milliseconds, a
// newline and the secret. It goes in the URL's sign parameter, next to
// timestamp.
func DingTalkSign(secret string, ms int64) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ms, 10) + "\n" + secret))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

type larkText struct {
	Timestamp string `json:"timestamp,omitempty"`
	Sign      string `json:"sign,omitempty"`
	MsgType   string `json:"msg_type"`
	Content   struct {
		Text string `json:"text"`
	} `json:"content"`
}

// LarkSign is the signature of a Lark/Feishu bot with a signing secret:
// base64 of HMAC-SHA256 of nothing, keyed with the timestamp in seconds, a
// newline and the secret (as Lark documents it). It goes in the body.
func LarkSign(secret string, sec int64) string {
	m := hmac.New(sha256.New, []byte(strconv.FormatInt(sec, 10)+"\n"+secret))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func larkPayload(e Event, console, secret string, now time.Time) ([]byte, error) {
	var m larkText
	m.MsgType = "text"
	m.Content.Text = e.Text(console)
	if secret != "" {
		m.Timestamp = strconv.FormatInt(now.Unix(), 10)
		m.Sign = LarkSign(secret, now.Unix())
	}
	return json.Marshal(m)
}
