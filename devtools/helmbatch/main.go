// helm-batch runs `helm template` many times in one process: helm v4.1.4's own command (helm.sh/helm/v4/pkg/cmd),
// as helm's main (cmd/helm/helm.go) runs it, once per call. The tests' check that every Helm value is read templates
// each release once per value it sets, hundreds of runs, and a helm process spent most of each run starting up.
//
// It reads a JSON array of calls, {"args": [...], "stdin": "..."}, and writes a JSON array of what helm gave each:
// {"returncode": 0, "stdout": "...", "stderr": "..."}. Each call gets its arguments, stdin, stdout and stderr as
// helm's main would. One thing carries over from call to call: helm's global settings (pkg/cmd's settings) keep the
// flags a call gave, and a later call that omits such a flag sees it. gpulab's calls all give the one they use,
// --namespace (render/charts.py), and tests/test_helm_batch.py holds the results to helm's own.
package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"runtime/debug"

	_ "k8s.io/client-go/plugin/pkg/client/auth"

	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/kube"
)

type call struct {
	Args  []string `json:"args"`
	Stdin string   `json:"stdin"`
}

type result struct {
	Returncode int    `json:"returncode"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
}

func main() {
	// Each call's garbage is its own, and there is plenty of memory for it: collecting at a quarter of the default
	// pace took a sixth less time over the tests' calls.
	debug.SetGCPercent(400)
	var calls []call
	if err := json.NewDecoder(os.Stdin).Decode(&calls); err != nil {
		fail(err)
	}
	results := make([]result, len(calls))
	for i, c := range calls {
		r, err := template(c)
		if err != nil {
			fail(err)
		}
		results[i] = r
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		fail(err)
	}
}

// template runs one call with files for its stdin, stdout and stderr.
func template(c call) (result, error) {
	stdin, stdout, stderr := os.Stdin, os.Stdout, os.Stderr
	defer func() { os.Stdin, os.Stdout, os.Stderr = stdin, stdout, stderr }()
	files := make([]*os.File, 3)
	for i := range files {
		f, err := os.CreateTemp("", "helm-batch-")
		if err != nil {
			return result{}, err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		files[i] = f
	}
	if _, err := files[0].WriteString(c.Stdin); err != nil {
		return result{}, err
	}
	if _, err := files[0].Seek(0, 0); err != nil {
		return result{}, err
	}
	os.Stdin, os.Stdout, os.Stderr = files[0], files[1], files[2]
	os.Args = append([]string{"helm"}, c.Args...)
	code := run()
	out, err := os.ReadFile(files[1].Name())
	if err != nil {
		return result{}, err
	}
	errs, err := os.ReadFile(files[2].Name())
	if err != nil {
		return result{}, err
	}
	return result{code, string(out), string(errs)}, nil
}

// run is helm's main with its exit code returned instead of exiting.
func run() int {
	kube.ManagedFieldsManager = "helm"
	cmd, err := helmcmd.NewRootCmd(os.Stdout, os.Args[1:], helmcmd.SetupLogging)
	if err != nil {
		slog.Warn("command failed", slog.Any("error", err))
		return 1
	}
	if err := cmd.Execute(); err != nil {
		if cerr, ok := err.(helmcmd.CommandError); ok {
			return cerr.ExitCode
		}
		return 1
	}
	return 0
}

func fail(err error) {
	os.Stderr.WriteString("helm-batch: " + err.Error() + "\n")
	os.Exit(2)
}
