package gitcmd

import "github.com/gitfleet/gitfleet/internal/repostate"

// publicClasses are the classes anyone may see of git's failures: the
// network and TLS are one (which of them failed tells ports apart), and
// the node's disk is its own failure, not the upstream's.
var publicClasses = map[Class]repostate.Class{
	ClassOther:       repostate.ClassOther,
	ClassTimeout:     repostate.ClassTimeout,
	ClassNetwork:     repostate.ClassUnreachable,
	ClassTLS:         repostate.ClassUnreachable,
	ClassNotFound:    repostate.ClassNotFound,
	ClassDeleted:     repostate.ClassNotFound,
	ClassAuth:        repostate.ClassAuth,
	ClassThrottled:   repostate.ClassThrottled,
	ClassDisk:        repostate.ClassInternal,
	ClassLegal:       repostate.ClassLegal,
	ClassTooLarge:    repostate.ClassTooLarge,
	ClassTooManyRefs: repostate.ClassTooManyRefs,
	ClassBadObjects:  repostate.ClassBadObjects,
	ClassBlocked:     repostate.ClassBlocked,
}

// Public returns the class of failure that anyone may see for c
// (repostate.ClassOther for a class it does not know, such as a previous
// version's text).
func (c Class) Public() repostate.Class {
	if p, ok := publicClasses[c]; ok {
		return p
	}
	return repostate.ClassOther
}
