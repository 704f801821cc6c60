// Package shoutrrr checks and sends notifications through shoutrrr. Only
// the kustodian-notify helper links it: shoutrrr's mail service uses
// text/template, and a binary that can reach text/template's run-time
// method lookup keeps every exported method of every type it links, which
// would stay resident in an agent that waits for weeks.
package shoutrrr

import (
	"errors"
	"fmt"

	"github.com/nicholas-fedor/shoutrrr/pkg/router"
	"github.com/nicholas-fedor/shoutrrr/pkg/types"

	"github.com/kustodian/kustodian/internal/notify"
)

// Check says whether shoutrrr knows the URL's service and accepts its
// settings. The error never repeats the URL's secrets.
func Check(raw string) error {
	_, err := locate(raw)
	return err
}

// Send sends one message to the URL, once.
func Send(raw, msg string) (err error) {
	svc, err := locate(raw)
	if err != nil {
		return err
	}
	defer func() {
		// A service that panics on what it was given: a failure, said
		// without the URL's secrets.
		if r := recover(); r != nil {
			err = errors.New(notify.Scrub(fmt.Sprintf("shoutrrr failed (%v)", r), raw))
		}
	}()
	if err := svc.Send(msg, &types.Params{}); err != nil {
		return errors.New(notify.Scrub(err.Error(), raw))
	}
	return nil
}

func locate(raw string) (svc types.Service, err error) {
	defer func() {
		// shoutrrr's router has been seen to panic on a URL it cannot
		// convert: a refusal, not a crash.
		if r := recover(); r != nil {
			err = fmt.Errorf("shoutrrr cannot read it (%v)", r)
			err = errors.New(notify.Scrub(err.Error(), raw))
		}
	}()
	svc, err = (&router.ServiceRouter{}).Locate(raw)
	if err != nil {
		return nil, errors.New(notify.Scrub(err.Error(), raw))
	}
	return svc, nil
}
