package agentopts

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kustodian/kustodian/internal/config"
)

// DefaultConfigFile is the configuration file the packages install as
// /etc/kustodian/config.yaml: every key with its default, commented out,
// and what it does. `make docs` writes it to packaging/config.yaml; a test
// keeps that file equal to this.
func DefaultConfigFile() []byte {
	var b bytes.Buffer
	b.WriteString(`# Kustodian agent configuration (kustodian agent, kustodian run, ...).
#
# Every key is shown with its default, commented out: uncomment and change
# what you need. A flag beats the environment (KUSTODIAN_*), which beats this
# file, which beats the default; kustodian agent --help lists them all.
# The agent reads this file at each start; a package upgrade keeps your edits.
`)
	defaults := config.Defaults()
	section := ""
	for _, o := range Options {
		parent, leaf, nested := strings.Cut(o.Key, ".")
		if !nested {
			parent, leaf = "", o.Key
		}
		indent := ""
		if parent != "" {
			if parent != section {
				fmt.Fprintf(&b, "\n#%s:\n", parent)
			}
			indent = "  "
		} else {
			b.WriteString("\n")
		}
		section = parent
		fmt.Fprintf(&b, "#%s# %s\n#%s%s: %s\n", indent, o.Usage, indent, leaf, yamlValue(o.Field(&defaults)))
	}
	return b.Bytes()
}

func yamlValue(v any) string {
	switch p := v.(type) {
	case *string:
		if *p == "" {
			return `""`
		}
		if strings.Contains(*p, ": ") || strings.Contains(*p, " #") || strings.ContainsAny((*p)[:1], "{[&*!|>'\"%@`") {
			return strconv.Quote(*p) // a YAML double-quoted string
		}
		return *p
	case *[]string:
		if len(*p) == 0 {
			return "[]"
		}
		var b strings.Builder
		for _, item := range *p {
			fmt.Fprintf(&b, "\n#    - %s", strconv.Quote(item))
		}
		return b.String()
	case *bool:
		return fmt.Sprint(*p)
	case *int:
		return fmt.Sprint(*p)
	case *time.Duration:
		return p.String()
	}
	panic(fmt.Sprintf("unsupported option type %T", v))
}
