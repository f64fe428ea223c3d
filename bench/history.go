package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// historyRuns is how many runs the key-row history keeps: the report
// shows each judged row's figure in the latest run and the two before it.
const historyRuns = 3

// pastRun is one run's judged rows: its label (commit and day) and each
// key row's short figure (the ratio, "short" when it missed its target).
type pastRun struct {
	label   string
	figures map[string]string
}

// producedBy reads a table's first line: "Produced by `...` on DAY TIME
// UTC at commit C."
var producedBy = regexp.MustCompile("^Produced by `[^`]*` on (\\S+) \\S+ UTC at commit (\\S+?)\\.")

// section is the text of doc between <!-- name:begin --> and
// <!-- name:end --> ("" when either is missing).
func section(doc, name string) string {
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return ""
	}
	return doc[i+len(begin) : j]
}

// tableRows are the cells of a Markdown table's body rows (header and
// separator left out).
func tableRows(text string) (header []string, rows [][]string) {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case header == nil:
			header = cells
		case strings.HasPrefix(cells[0], "---"):
		default:
			rows = append(rows, cells)
		}
	}
	return header, rows
}

// shortFigure is a figure's leading ratio or count, and "short" when its
// status says it missed.
func shortFigure(figure, status string) string {
	f, _, _ := strings.Cut(figure, " ")
	if strings.Contains(status, "short") {
		f += " short"
	}
	return f
}

// tableRun is the run a bench table records: its label from its first
// line, every row's short figure (a row judged only in a later run keeps
// its figure from this one).
func tableRun(text string) (pastRun, bool) {
	m := producedBy.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return pastRun{}, false
	}
	r := pastRun{label: m[2] + " (" + m[1] + ")", figures: map[string]string{}}
	_, rows := tableRows(text)
	for _, c := range rows {
		if len(c) == 4 {
			r.figures[c[0]] = shortFigure(c[1], c[3])
		}
	}
	return r, true
}

// historyOf reads the runs a history table holds, oldest first.
func historyOf(text string) []pastRun {
	header, rows := tableRows(text)
	if len(header) < 3 {
		return nil
	}
	runs := make([]pastRun, len(header)-2)
	for i := range runs {
		runs[i] = pastRun{label: header[i+2], figures: map[string]string{}}
	}
	for _, c := range rows {
		for i := range runs {
			if i+2 < len(c) && c[i+2] != "—" {
				runs[i].figures[c[0]] = c[i+2]
			}
		}
	}
	return runs
}

// historyTable is the key rows of the runs before this one (read from doc:
// its history, or, the first time, the bench table this run replaces) and
// of this run (latest, its rows): each judged row with its target and its
// short figure in every run kept.
func historyTable(doc string, latest pastRun, rows []row) string {
	runs := historyOf(section(doc, "bench-history"))
	if len(runs) == 0 {
		if previous, ok := tableRun(section(doc, "bench")); ok {
			runs = []pastRun{previous}
		}
	}
	runs = append(runs, latest)
	if len(runs) > historyRuns {
		runs = runs[len(runs)-historyRuns:]
	}
	var b strings.Builder
	b.WriteString("| key row | target |")
	sep := "|---|---|"
	for _, r := range runs {
		fmt.Fprintf(&b, " %s |", r.label)
		sep += "---|"
	}
	b.WriteString("\n" + sep + "\n")
	for _, x := range rows {
		if x.target == "" {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s |", x.what, x.target)
		for _, r := range runs {
			f := r.figures[x.what]
			if f == "" {
				f = "—"
			}
			fmt.Fprintf(&b, " %s |", f)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// writeWithHistory writes this run's table (markdown, its first line
// naming the run) into path's bench section and its key rows, beside
// those of the two runs before it, into the bench-history section.
func writeWithHistory(path, markdown string, rows []row) error {
	doc, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	latest, ok := tableRun(markdown)
	if !ok {
		return fmt.Errorf("bench: the report's first line names no run: %.80q", markdown)
	}
	history := historyTable(string(doc), latest, rows)
	if err := writeReport(path, markdown); err != nil {
		return err
	}
	return writeReportAt(path, "bench-history", history)
}
