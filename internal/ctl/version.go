package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/internal/status"
	"github.com/kustodian/kustodian/internal/version"
)

// versions is what `kustodian-ctl version` says: this binary's build and,
// unless --client, the API server's Kubernetes version and the versions
// the agents say on their Nodes.
type versions struct {
	Client clientVersion  `json:"client"`
	Server *serverVersion `json:"server,omitempty"`
	// ServerError says why the API server could not tell its version.
	ServerError string `json:"serverError,omitempty"`
	// Agents: each version an agent said on its Node, with those Nodes,
	// the most common first; Unsaid, the Nodes without one (no agent
	// started there since it could say it).
	Agents      []agentVersion `json:"agents,omitempty"`
	Unsaid      []string       `json:"unsaid,omitempty"`
	AgentsError string         `json:"agentsError,omitempty"`
}

type agentVersion struct {
	Version string   `json:"version"`
	Nodes   []string `json:"nodes"`
}

type clientVersion struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Built     string `json:"built"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

type serverVersion struct {
	GitVersion string `json:"gitVersion"`
	Platform   string `json:"platform"`
}

func newVersionCommand(o *options) *cobra.Command {
	var client, short bool
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of kustodian-ctl, of the cluster's Kubernetes and of the agents on its Nodes",
		Example: `  kustodian-ctl version
  kustodian-ctl version --client -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "" && format != outputJSON && format != outputYAML {
				return fmt.Errorf("-o %s: version prints json or yaml (without -o: lines)", format)
			}
			if short {
				_, err := fmt.Fprintln(o.streams.Out, version.Version)
				return err
			}
			v := versions{Client: clientVersion{Version: version.Version, Commit: version.Commit, Built: version.Date,
				GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}}
			var serverErr, agentsErr error
			if !client {
				v.Server, serverErr = o.serverVersion()
				if serverErr != nil {
					v.ServerError = serverErr.Error()
				} else if v.Agents, v.Unsaid, agentsErr = o.agentVersions(cmd.Context()); agentsErr != nil {
					v.AgentsError = agentsErr.Error()
				}
			}
			if err := printVersions(o, v, format); err != nil {
				return err
			}
			for _, w := range skew(v) {
				fmt.Fprintln(o.streams.ErrOut, "warning: "+w)
			}
			if serverErr != nil {
				return fmt.Errorf("the API server's version: %w (--client prints this binary's alone)", serverErr)
			}
			if agentsErr != nil {
				return fmt.Errorf("the agents' versions: %w (--client prints this binary's alone)", agentsErr)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&client, "client", false, "print this binary's version alone, without asking the API server")
	cmd.Flags().BoolVar(&short, "short", false, "print only this binary's version number")
	cmd.Flags().StringVarP(&format, "output", "o", "", "output format: json, yaml (without -o: lines)")
	return cmd
}

func (o *options) serverVersion() (*serverVersion, error) {
	client, err := o.client()
	if err != nil {
		return nil, err
	}
	info, err := client.Discovery().ServerVersion()
	if err != nil {
		return nil, err
	}
	return &serverVersion{GitVersion: info.GitVersion, Platform: info.Platform}, nil
}

// agentVersions reads the version each agent said on its Node
// (kustodian.io/agent-version), grouped, the most common first.
func (o *options) agentVersions(ctx context.Context) ([]agentVersion, []string, error) {
	client, err := o.client()
	if err != nil {
		return nil, nil, err
	}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, status.Explain(err, "list", "nodes", "")
	}
	byVersion := map[string][]string{}
	var unsaid []string
	for _, n := range list.Items {
		// Each node writes its own (its kubelet's credentials at any
		// length): kept to what a version needs and written out visibly,
		// in every format, as every string a node writes.
		if v := shownVersion(n.Annotations[nodemarks.AnnotationAgentVersion]); v != "" {
			byVersion[v] = append(byVersion[v], n.Name)
		} else {
			unsaid = append(unsaid, n.Name)
		}
	}
	var out []agentVersion
	for v, nodes := range byVersion {
		slices.Sort(nodes)
		out = append(out, agentVersion{Version: v, Nodes: nodes})
	}
	slices.SortFunc(out, func(a, b agentVersion) int {
		if d := len(b.Nodes) - len(a.Nodes); d != 0 {
			return d
		}
		return strings.Compare(a.Version, b.Version)
	})
	slices.Sort(unsaid)
	return out, unsaid, nil
}

// shownVersion is a version a node said, as kustodian-ctl shows it: its
// characters that could steer a terminal written out, and no longer than a
// version is.
func shownVersion(said string) string {
	v := status.Printable(said)
	if r := []rune(v); len(r) > nodemarks.MaxAgentVersionLength {
		v = string(r[:nodemarks.MaxAgentVersionLength]) + "..."
	}
	return v
}

// skew says what a reader should know about the versions: agents of more
// than one version (as while they are upgraded node by node), or none of
// this binary's.
func skew(v versions) []string {
	var out []string
	if len(v.Agents) > 1 {
		var each []string
		for _, a := range v.Agents {
			each = append(each, fmt.Sprintf("%s on %d", a.Version, len(a.Nodes)))
		}
		out = append(out, fmt.Sprintf("the agents run %d versions (%s): as while they are upgraded, node by node; kustodian-ctl and the agents of one release are tested together", len(v.Agents), strings.Join(each, ", ")))
	}
	if len(v.Agents) > 0 && !slices.ContainsFunc(v.Agents, func(a agentVersion) bool { return a.Version == v.Client.Version }) {
		out = append(out, fmt.Sprintf("no agent runs kustodian-ctl's version %s", v.Client.Version))
	}
	return out
}

// someNodes names up to five nodes, and how many more.
func someNodes(nodes []string) string {
	if len(nodes) <= 5 {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(nodes[:5], ", "), len(nodes)-5)
}

func printVersions(o *options, v versions, format string) error {
	var b []byte
	var err error
	switch format {
	case outputJSON:
		b, err = json.MarshalIndent(v, "", "  ")
		b = append(b, '\n')
	case outputYAML:
		b, err = yaml.Marshal(v)
	default:
		s := fmt.Sprintf("Client: %s\n", version.String("kustodian-ctl"))
		if v.Server != nil {
			s += fmt.Sprintf("Server: Kubernetes %s (%s)\n", v.Server.GitVersion, v.Server.Platform)
		}
		for _, a := range v.Agents {
			s += fmt.Sprintf("Agents: kustodian %s on %d node(s): %s\n", a.Version, len(a.Nodes), someNodes(a.Nodes))
		}
		if len(v.Unsaid) > 0 && v.Server != nil {
			s += fmt.Sprintf("Agents: none has said its version on %d node(s) (no agent started there since it could): %s\n", len(v.Unsaid), someNodes(v.Unsaid))
		}
		b = []byte(s)
	}
	if err != nil {
		return err
	}
	_, err = o.streams.Out.Write(b)
	return err
}
