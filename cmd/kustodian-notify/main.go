// Command kustodian-notify sends the Kustodian agent's notifications
// through shoutrrr, one message or one check per run. The agent runs it;
// it reads its request from standard input, so that the URLs, which hold
// tokens, never show in the process list:
//
//	kustodian-notify check   a URL; exit 0 when shoutrrr accepts it
//	kustodian-notify send    {"url": "...", "message": "..."}; exit 0 once delivered
//
// A refusal or a failure is one line on standard error that never repeats
// the URL's secrets, and exit status 1.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kustodian/kustodian/internal/notify"
	"github.com/kustodian/kustodian/internal/notify/shoutrrr"
)

const usage = `usage: kustodian-notify check|send (request on standard input)
  check  a shoutrrr URL: exit 0 when shoutrrr accepts it
  send   {"url": "...", "message": "..."}: send the message once
The Kustodian agent runs this helper; see "Notifications" in its documentation.`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "check":
		err = check(os.Stdin)
	case "send":
		err = send(os.Stdin)
	case "-h", "--help", "help":
		fmt.Println(usage)
		return
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
}

func check(in io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(in, 1<<20))
	if err != nil {
		return err
	}
	return shoutrrr.Check(strings.TrimSpace(string(b)))
}

func send(in io.Reader) error {
	var req notify.Request
	if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&req); err != nil {
		return fmt.Errorf("the request on standard input is not {\"url\": ..., \"message\": ...}: %v", err)
	}
	return shoutrrr.Send(strings.TrimSpace(req.URL), req.Message)
}
