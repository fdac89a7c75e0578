package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"p2pfault/exitcode"
)

// The command-line reference in docs/cli is generated from the commands
// themselves, so it cannot drift from --help (TestCLIReferenceIsCurrent
// fails when it has).
//go:generate go run .. gen-docs ../docs/cli

// docPrefix starts the name of every file the reference holds
// (p2pfault.md, p2pfault_run.md, ...): what gen-docs owns in its folder.
const docPrefix = "p2pfault"

// newGenDocsCommand is the hidden `p2pfault gen-docs DIR`: it writes the
// Markdown reference of every command into DIR (docs/cli in the
// repository), one file per command.
func newGenDocsCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-docs DIR",
		Short:  "Write the command-line reference (Markdown, one file per command) into DIR",
		Hidden: true,
		Args:   oneArg("gen-docs", "folder"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := genDocs(cmd.Root(), args[0]); err != nil {
				return exitcode.AsUsage(fmt.Errorf("gen-docs: %w", err))
			}
			return nil
		},
	}
}

// genDocs writes root's reference into dir. The files of commands that
// are gone are removed first, so that dir holds exactly the reference of
// today's commands; files of other names are left alone. The output
// depends on the commands only: no "auto generated on DATE" line.
func genDocs(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, docPrefix+"*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	disableAutoGenTag(root)
	return doc.GenMarkdownTree(root, dir)
}

func disableAutoGenTag(cmd *cobra.Command) {
	cmd.DisableAutoGenTag = true
	for _, c := range cmd.Commands() {
		disableAutoGenTag(c)
	}
}
