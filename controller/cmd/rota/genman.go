package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/rota-hpc/rota/internal/buildinfo"
)

// newGenManCmd writes the man pages, one per command, from the same tree
// (and flags) that parses the command line: `make man` runs it. Hidden:
// it is for the build, not for users.
func newGenManCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "gen-man --dir DIR",
		Short:  "write the man pages (rota.1, rota-sim.1, ...) into DIR",
		Hidden: true,
		Args:   usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{"--dir is required"}
			}
			return writeManPages(cmd.Root(), dir)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the pages into (made if missing)")
	return cmd
}

// writeManPages writes section-1 pages for root and every visible command
// below it. Their date is $SOURCE_DATE_EPOCH when set (reproducible
// packages), else today.
func writeManPages(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	header := &doc.GenManHeader{Title: "ROTA", Section: "1", Source: "Rota " + buildinfo.Version, Manual: "Rota Manual"}
	if err := doc.GenManTree(root, header, dir); err != nil {
		return fmt.Errorf("writing man pages: %w", err)
	}
	return nil
}
