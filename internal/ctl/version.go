package ctl

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/version"
)

// versions is what `kustodian-ctl version` says: this binary's build and,
// unless --client, the API server's Kubernetes version.
type versions struct {
	Client clientVersion  `json:"client"`
	Server *serverVersion `json:"server,omitempty"`
	// ServerError says why the API server could not tell its version.
	ServerError string `json:"serverError,omitempty"`
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
		Short: "Print the version of kustodian-ctl and of the cluster's Kubernetes",
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
			var serverErr error
			if !client {
				v.Server, serverErr = o.serverVersion()
				if serverErr != nil {
					v.ServerError = serverErr.Error()
				}
			}
			if err := printVersions(o, v, format); err != nil {
				return err
			}
			if serverErr != nil {
				return fmt.Errorf("the API server's version: %w (--client prints this binary's alone)", serverErr)
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
		b = []byte(s)
	}
	if err != nil {
		return err
	}
	_, err = o.streams.Out.Write(b)
	return err
}
