package gitserve

import (
	"bytes"
	"crypto/sha1"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// FuzzCheckAnswer feeds checkAnswer any bytes: it must return, and never
// panic.
func FuzzCheckAnswer(f *testing.F) {
	empty := []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00")
	sum := sha1.Sum(empty)
	empty = append(empty, sum[:]...)
	f.Add([]byte("0008NAK\n0000"))
	f.Add(append([]byte("0008NAK\n"), empty...))
	f.Add([]byte("000dpackfile\n" + pktLine("\x01"+string(empty)) + "0000"))
	f.Add([]byte("0011\x03error: boom\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = checkAnswer(bytes.NewReader(b))
	})
}

func TestCheckAnswerTakesAnEmptyPackOfEitherFraming(t *testing.T) {
	empty := []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00")
	sum := sha1.Sum(empty)
	empty = append(empty, sum[:]...)
	for name, answer := range map[string]string{
		"v0 raw":       "0008NAK\n" + string(empty),
		"v2 side-band": "000dpackfile\n" + pktLine("\x02progress") + pktLine("\x01"+string(empty)) + "0000",
		"no pack":      "0008NAK\n0000",
	} {
		if err := checkAnswer(bytes.NewReader([]byte(answer))); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := append([]byte(nil), empty...)
	bad[len(bad)-1] ^= 1
	for name, answer := range map[string]string{
		"a wrong trailer": "0008NAK\n" + string(bad),
		"an error band":   "000dpackfile\n" + pktLine("\x03boom") + "0000",
		"a short pack":    "000dpackfile\n" + pktLine("\x01"+string(empty[:20])) + "0000",
	} {
		if err := checkAnswer(bytes.NewReader([]byte(answer))); err == nil {
			t.Errorf("%s was taken", name)
		}
	}
}

func TestAnUploadPackThatDiesReadingAPackIsDamage(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		class  gitcmd.Class
		damage bool
	}{
		{"error: inflate: data stream error (incorrect data check)\nfatal: unable to unpack 4e65d8fd contents", gitcmd.ClassOther, true},
		{"fatal: git upload-pack: git-pack-objects died with error.\nfatal: git upload-pack: aborting due to possible repository corruption on the remote side.", gitcmd.ClassOther, true},
		{"error: bad packed object CRC for 4e65d8fd", gitcmd.ClassOther, true},
		{"fatal: git upload-pack: not our ref 4e65d8fd", gitcmd.ClassOther, false},
		{"fatal: the remote end hung up unexpectedly", gitcmd.ClassOther, false},
		{"fatal: git upload-pack: git-pack-objects died with error. fatal: out of memory", gitcmd.ClassTooLarge, false},
	} {
		got := packError(&gitcmd.Error{Args: []string{"upload-pack"}, ExitCode: 128, Stderr: tc.stderr, Class: tc.class})
		if damage := gitcmd.ClassOf(got) == gitcmd.ClassBadObjects; damage != tc.damage {
			t.Errorf("%q: class %q, want damage %v", tc.stderr, gitcmd.ClassOf(got), tc.damage)
		}
	}
}
