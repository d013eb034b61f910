#!/usr/bin/env bats
# fs: ext4 xfs
# dioshim status, the live view: with no FILE, every file served whose
# segment the caller can read (its path, found again through the
# segment's handle, "(deleted)" when gone; its writers' pids); --json, the
# same numbers as one document; -w, again and again; and bad input — a
# file not served, a directory, a missing path, a segment of a newer
# layout, a corrupt one — one line each and exit status 1, never a crash.

load helper

setup_file() {
	fs_setup_file "${FS:-ext4}" 512M
	# A segment directory of its own: the listing shows this suite's
	# segments only, whatever runs beside it.
	DIOSHIM_SHM_DIR=$(mktemp -d /dev/shm/dioshim-status.XXXXXX)
	export DIOSHIM_SHM_DIR
}
teardown_file() {
	rm -rf "${DIOSHIM_SHM_DIR:?}"
	fs_teardown_file
}
setup() {
	fs_require
	F=$SCRATCH_MNT/status.$BATS_TEST_NUMBER
	T=$BATS_TEST_TMPDIR
	PIDS=()
}
teardown() {
	local p
	touch "$T/go" 2>/dev/null || true
	for p in "${PIDS[@]}"; do
		timeout 60 tail --pid="$p" -f /dev/null || kill "$p" 2>/dev/null || true
	done
	rm -f "$F" "$F".*
	rm -rf "${DIOSHIM_SHM_DIR:?}"/dioshim.*
}

# start_paused FILE TAG [OPTION...]: a writer under the shim
# (t_appender, 2 threads) of FILE, paused after
# 64 records until $T/go exists; its pid in PIDS.  Started by exec'ing
# the launcher, so that $! is the writer.
start_paused() {
	local file=$1 tag=$2
	shift 2
	"$DIOSHIM" "$HELPERS/t_appender" -t 2 -n 200 "$@" \
		-p "64:$T/ready.$tag:$T/go" -l "$T/log.$tag" "$file" \
		>"$T/out.$tag" 2>&1 3>&- &
	PIDS+=($!)
	wait_file "$T/ready.$tag"
}

# The killed writer's segment (segprobe a: 8 blocks, then SIGKILL).
killed_writer() {
	( "$DIOSHIM" "$HELPERS/segprobe" "$1" a ) 2>/dev/null || true
	SEG=$(segment_of "$1")
	[ -e "$SEG" ]
}

@test "dioshim status with no FILE lists every file served: its path, its writers' pids, the numbers of dioshim status FILE; --json parses and says the same" {
	start_paused "$F" a -c
	start_paused "$F" b -w 2
	start_paused "$F.other" c -c
	run "$DIOSHIM" status
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 2 ]
	local line
	line=$(grep "^$F: " <<<"$output")
	[[ "$line" == *" procs 2 "* ]]
	[[ "$line" == *" pids ${PIDS[0]},${PIDS[1]}" ]] ||
		[[ "$line" == *" pids ${PIDS[1]},${PIDS[0]}" ]]
	[[ "$line" == *" mode reserving reserved "* ]]
	grep -q "^$F.other: .* procs 1 .* pids ${PIDS[2]}\$" <<<"$output"
	# The same line as dioshim status FILE gives (the writers are
	# paused: nothing moves).
	run "$DIOSHIM" status "$F"
	[ "$status" -eq 0 ]
	[ "$output" = "$line" ]
	# reserved is phys - eof; the record and counters are there.
	local eof phys reserved
	eof=$(awk '{ print $3 }' <<<"$line")
	phys=$(awk '{ print $5 }' <<<"$line")
	reserved=$(sed -n 's/.* reserved \([0-9]*\) .*/\1/p' <<<"$line")
	[ "$reserved" -eq $((phys - eof)) ]
	[ "$eof" -ge $((64 * 4096)) ]
	# JSON: valid, and the same numbers as the lines.
	"$DIOSHIM" status --json >"$T/json"
	python3 -m json.tool "$T/json" >/dev/null
	"$DIOSHIM" status >"$T/text"
	python3 - "$T/json" "$T/text" "$F" "${PIDS[*]}" <<-'EOF'
	import json, sys
	doc = json.load(open(sys.argv[1]))
	text = open(sys.argv[2]).read().splitlines()
	f, pids = sys.argv[3], [int(p) for p in sys.argv[4].split()]
	assert doc["errors"] == [], doc["errors"]
	files = {o["path"]: o for o in doc["files"]}
	assert len(files) == 2 == len(text), (files.keys(), text)
	for line in text:
	    path, rest = line.split(": ", 1)
	    w = rest.split()
	    kv = dict(zip(w[0::2], w[1::2]))
	    o = files[path]
	    for k in ("eof", "phys", "tail", "users", "procs", "inflight",
	              "writes", "bytes", "appends", "reserves", "exact",
	              "prefills", "reserved", "queued"):
	        assert int(kv[k]) == o[k], (path, k, kv[k], o[k])
	    assert int(kv["kernel-size"]) == o["kernel_size"]
	    assert kv["mode"] == o["mode"] and not o["deleted"]
	    assert kv["record"] == "%d/%d" % (o["record_eof"], o["record_phys"])
	    assert kv["pids"] == ",".join(str(x["pid"]) for x in o["writers"])
	assert sorted(x["pid"] for x in files[f]["writers"]) == sorted(pids[:2])
	assert all(x["alive"] for x in files[f]["writers"])
	assert files[f]["reserved"] == files[f]["phys"] - files[f]["eof"] > 0
	EOF
	# Every writer goes on and leaves: nothing is listed.
	touch "$T/go"
	for p in "${PIDS[@]}"; do wait "$p"; done
	PIDS=()
	run "$DIOSHIM" status
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	run "$DIOSHIM" status --json
	[ "$status" -eq 0 ]
	python3 -c 'import json, sys; d = json.loads(sys.argv[1]); assert d["files"] == [] and d["errors"] == []' "$output"
}

@test "dioshim status: a killed writer's file renamed is found through its handle; deleted, it is shown (deleted) and its writer gone" {
	killed_writer "$F"
	mkdir -p "$SCRATCH_MNT/moved"
	mv "$F" "$SCRATCH_MNT/moved/f"
	run "$DIOSHIM" status
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == "$SCRATCH_MNT/moved/f: eof 32768 "* ]]
	[[ "$output" == *" kernel-size $(real_size "$SCRATCH_MNT/moved/f") "* ]]
	[[ "$output" =~ \ pids\ [0-9]+\(gone\)$ ]]
	rm "$SCRATCH_MNT/moved/f"
	rmdir "$SCRATCH_MNT/moved"
	run "$DIOSHIM" status
	echo "$output"
	[ "$status" -eq 0 ]
	# Gone: the path its segment recorded, where it was made.
	[[ "$output" == "$F (deleted): eof 32768 "* ]]
	[[ "$output" == *" kernel-size - "* ]]
	run "$DIOSHIM" status --json
	python3 -c 'import json, sys; o = json.loads(sys.argv[1])["files"][0]; assert o["deleted"] and o["kernel_size"] is None and not o["writers"][0]["alive"], o' "$output"
	# gc then removes it: nothing left to list.
	"$DIOSHIM" gc
	run "$DIOSHIM" status
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "dioshim status on bad input: not served, a directory, a missing path, a newer layout, a corrupt segment: one line each, exit 1, nothing changed" {
	local dir=$SCRATCH_MNT/dir.$BATS_TEST_NUMBER
	mkdir -p "$dir"
	noshim head -c 5000 /dev/zero >"$F.plain"
	run "$DIOSHIM" status "$F.plain"
	echo "$output"
	[ "$status" -eq 1 ]
	[ "$output" = "dioshim: $F.plain: not served: no segment (size 5000)" ]
	run "$DIOSHIM" status "$dir"
	[ "$status" -eq 1 ]
	[ "$output" = "dioshim: $dir: not a regular file: never served" ]
	run "$DIOSHIM" status "$F.missing"
	[ "$status" -eq 1 ]
	[ "$output" = "dioshim: $F.missing: No such file or directory" ]
	# One line per file, the served one's among them.
	killed_writer "$F"
	run "$DIOSHIM" status "$F.plain" "$dir" "$F" "$F.missing"
	echo "$output"
	[ "$status" -eq 1 ]
	[ "${#lines[@]}" -eq 4 ]
	[[ "${lines[*]}" == *"$F: eof 32768 "* ]]
	run "$DIOSHIM" status --json "$F.plain" "$dir" "$F" "$F.missing"
	[ "$status" -eq 1 ]
	python3 -c 'import json, sys; d = json.loads(sys.argv[1]); assert len(d["files"]) == 1 and len(d["errors"]) == 3, d' "$output"
	# A segment of a newer layout (version 9 in its header).
	printf '\11\0\0\0' | dd of="$SEG" bs=1 seek=8 conv=notrunc status=none
	local sum
	sum=$(sha256sum <"$SEG")
	for args in "$F" ""; do
		# shellcheck disable=SC2086
		run "$DIOSHIM" status $args
		echo "$output"
		[ "$status" -eq 1 ]
		[ "${#lines[@]}" -eq 1 ]
		[[ "$output" == *"segment $SEG is of layout version 9, newer than this dioshim's 8"* ]]
	done
	# A corrupt one: its magic.
	noshim "$HELPERS/segprobe" "$SEG" fuzz 1 0 1
	sum=$(sha256sum <"$SEG")
	run "$DIOSHIM" status "$F"
	echo "$output"
	[ "$status" -eq 1 ]
	[ "$output" = "dioshim: $F: corrupt segment $SEG (not a dioshim segment)" ]
	# Read, never written.
	[ "$(sha256sum <"$SEG")" = "$sum" ]
	[ "$(real_size "$F")" -gt 32768 ]
}

@test "dioshim status on a killed writer's segment with each word of its header fuzzed, and 48 random words of its head and slots: never a crash, one line a file" {
	local w out rc i
	for w in $(seq 0 127) r{1..20}; do
		rm -f "$F"
		rm -rf "${DIOSHIM_SHM_DIR:?}"/dioshim.*
		killed_writer "$F"
		case $w in
		r*) noshim "$HELPERS/segprobe" "$SEG" fuzz 48 0 1024 ;;
		*) noshim "$HELPERS/segprobe" "$SEG" fuzz 1 "$w" 1 ;;
		esac
		for i in file list json; do
			rc=0
			case $i in
			file) out=$(timeout 60 "$DIOSHIM" status "$F" 2>&1) || rc=$? ;;
			list) out=$(timeout 60 "$DIOSHIM" status 2>&1) || rc=$? ;;
			json) out=$(timeout 60 "$DIOSHIM" status --json "$F" 2>/dev/null) || rc=$?
			      python3 -m json.tool <<<"$out" >/dev/null ||
				{ echo "word $w: not JSON: $out"; return 1; } ;;
			esac
			[ "$rc" -le 1 ] || { echo "word $w $i: exit $rc: $out"; return 1; }
			[ "$i" = json ] || [ "$(wc -l <<<"$out")" -eq 1 ] ||
				{ echo "word $w $i: $out"; return 1; }
		done
	done
}

@test "dioshim status -w SECS prints the view again every SECS until interrupted; a SECS that is no positive number is refused with exit 2" {
	start_paused "$F" a -c
	run timeout --preserve-status -s INT 3 "$DIOSHIM" status -w 0.5 --json
	[ "$status" -eq 0 ]
	# Several documents, each a JSON object with the file in it.
	[ "$(grep -c '"files":' <<<"$output")" -ge 3 ]
	run timeout --preserve-status -s INT 2 "$DIOSHIM" status -w 1 "$F"
	[ "$status" -eq 0 ]
	[[ "$output" == "Every 1s: dioshim status FILE..."* ]]
	[ "$(grep -c "^$F: eof " <<<"$output")" -ge 2 ]
	local bad
	for bad in 0 -1 abc 1x "" nan inf 1e9; do
		run "$DIOSHIM" status -w "$bad" "$F"
		echo "$bad: $output"
		[ "$status" -eq 2 ]
		[[ "${lines[0]}" == "dioshim status: -w wants a number of seconds"* ]]
	done
	run "$DIOSHIM" status -w
	[ "$status" -eq 2 ]
	run "$DIOSHIM" status --bogus
	[ "$status" -eq 2 ]
	[[ "$output" == *"unknown option --bogus"* ]]
}
