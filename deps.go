//go:build tools

package main

import (
	_ "github.com/NimbleMarkets/ntcharts/canvas"
	_ "github.com/charmbracelet/bubbles/key"
	_ "github.com/charmbracelet/bubbletea"
	_ "github.com/charmbracelet/lipgloss"
	_ "github.com/charmbracelet/x/exp/golden"
	_ "github.com/charmbracelet/x/exp/teatest"
	_ "github.com/google/uuid"
	_ "github.com/prometheus/procfs"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/spf13/cobra"
	_ "github.com/vmihailenco/msgpack/v5"
	_ "golang.org/x/sys/unix"
	_ "gonum.org/v1/plot"
)
