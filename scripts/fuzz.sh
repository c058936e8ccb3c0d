#!/usr/bin/env bash
# Runs each fuzz target ("pkg:Name") for a given time. The go command's
# fuzzing coordinator sometimes fails a run with only "context deadline
# exceeded" when its workers are slow to stop at the end of -fuzztime on a
# loaded machine; such a run found nothing (a finding is written to
# testdata/fuzz/Name/ and reported as such), so it is run once more. Any
# other failure, or a second one, fails. A package in another module of
# the repository (./apps/xdpfwd: apps/ has its own go.mod) is fuzzed from
# that module's directory.
set -u
go=${GO:-go}
fuzztime=$1; shift
for t in "$@"; do
	pkg=${t%%:*}; name=${t##*:}
	mod=.; d=$pkg
	while [ "$d" != "." ] && [ "$d" != "/" ]; do
		if [ -f "$d/go.mod" ]; then mod=$d; break; fi
		d=$(dirname "$d")
	done
	rel=./${pkg#"$mod"}; rel=${rel%/}; rel=${rel/#.\/\//./}
	echo "fuzz $pkg $name for $fuzztime"
	for try in 1 2; do
		log=$(mktemp)
		if (cd "$mod" && "$go" test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "$rel") >"$log" 2>&1; then
			grep -E "execs" "$log" | tail -n 1
			rm -f "$log"
			break
		fi
		if [ "$try" = 1 ] && grep -q "context deadline exceeded" "$log" && ! grep -q "Failing input written to" "$log"; then
			echo "fuzz $pkg $name: the coordinator timed out stopping its workers (nothing found); once more"
			rm -f "$log"
			continue
		fi
		cat "$log"; rm -f "$log"
		exit 1
	done
done
