# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_raidctl_global_optspecs
    string join \n h/help V/version
end

function __fish_raidctl_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_raidctl_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_raidctl_using_subcommand
    set -l cmd (__fish_raidctl_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c raidctl -n "__fish_raidctl_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c raidctl -n "__fish_raidctl_needs_command" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "create" -d 'Create an array over MEMBERs (files or block devices)'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "status" -d 'Show an array\'s state and its members'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "list" -d 'List every array found: served ones, and those on block devices or in --scan directories'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "assemble" -d 'Serve every array found on block devices (and --dir locations) that nothing serves yet'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "monitor" -d 'Watch every array\'s events: print them, run a program, send mail (as mdadm --monitor)'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "clear" -d 'Reset members\' read, write and checksum error counters (as zpool clear)'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "set" -d 'Change a member\'s settings: its rated endurance'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "wipe" -d 'Erase a member\'s raidctl superblocks and metadata area (as mdadm --zero-superblock)'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "examine" -d 'Show the superblock of one member'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "read" -d 'Read bytes from an array (to stdout by default)'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "write" -d 'Write bytes into an array (from stdin by default); flushed before it returns'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "fail" -d 'Mark a member faulty; a hot spare then takes its place'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "remove" -d 'Remove a faulty or spare member from an array'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "add" -d 'Add a member: it rebuilds a missing slot, or waits as a hot spare'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "replace" -d 'Replace a member with a new device while it keeps serving'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "rebuild" -d 'Rebuild (or resume the rebuild of) every slot that has a target; promote hot spares first'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "loop" -d 'Loop devices for simulations'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "wear" -d 'Per-member wear, projected wear-out dates, skew and the collision window'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "simulate" -d 'Simulate member wear over years for a level, workload and write rate, or replay a wear plan'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "inspect" -d 'Show device facts that matter for an SSD array'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "inject" -d 'Failure drill on a served array: inject faults into one member, or clear them'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "drill" -d 'Rehearse a failure offline and report what the array did (writes a region, then restores it)'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "serve" -d 'Export an array as an NBD block device (Unix socket by default; TCP with --listen)'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "scrub" -d 'Check every block\'s checksum, parity and mirror copies (exit 1 when unrepaired problems remain)'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "bench" -d 'Benchmark an array (CrystalDiskMark profiles through the engine) or the parity kernels'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "profile" -d 'Measure sustained random-write IOPS against over-provisioning on one SSD (destructive)'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "completions" -d 'Print shell completions'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "generate" -d 'Generate man pages and completions into a directory (for packaging)'
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s l -l level -d 'RAID level: 0, 1, 5, 6, 10 or f1 (RAID 5 with parity skewed onto one member)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s c -l chunk -d 'Chunk size (power of two, 4K to 16M)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s n -l name -d 'Array name' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l skew -d 'Parity weights, one per member, with --level f1 (e.g. 16,1,1,1,1: slot 0 holds 16 of every 20 parity chunks); refused with any other level' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l parity-heavy -d 'F1: the slot that takes the extra parity' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l copies -d 'RAID10: copies of each chunk (near layout)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l size -d 'Create missing member files, or extend smaller ones, to this size' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l overprovision -d 'Percent of each member left unused at the tail and discarded (SSD overprovisioning), or auto: each member\'s recommendation from its saved `raidctl profile`' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l endurance -d 'Rated endurance in terabytes written, one value for all members or one per member' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l history-interval -d 'Time between wear history samples (e.g. 1d, 12h, 3600)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l checksum -d 'Hash of the per-block checksums: xxh3 (xxh3-128, fast, made to catch accidental corruption) or blake3 (cryptographic, five to eight times the CPU per block)' -r -f -a "xxh3\t''
blake3\t''"
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l bitmap-chunk -d 'Member data per write-intent bitmap bit (power of two, at least the chunk; default 64M, coarser where the bitmap would pass 64 KiB). Smaller bounds what an unclean stop puts at risk more tightly (the resync covers the regions marked at the crash; without checksums so does what a member lost in a power cut costs) and costs more bitmap writes: the first write into each clean region writes and flushes the bitmap' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l no-checksums -d 'Do not keep per-block checksums (reads and scrub then rely on parity and copies alone, and RAID0 corruption goes undetected)'
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s f -l force -d 'Overwrite members that hold a file system or another array (never a mounted or busy one)'
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l json -d 'Print the new array\'s status as JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand status" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand status" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand status" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand status" -l prometheus -d 'Print Prometheus text: array state, disks by state, sync progress, member state, errors, bytes written and bad blocks (labels: array name and uuid, member uuid, slot)'
complete -c raidctl -n "__fish_raidctl_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c raidctl -n "__fish_raidctl_using_subcommand status" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand list" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable. Block devices are always looked at; member files only where named here' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand list" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand list" -l prometheus -d 'Print Prometheus text of every array and member (for node_exporter\'s textfile collector): state, disks by state, sync progress, errors, bytes written, bad blocks'
complete -c raidctl -n "__fish_raidctl_using_subcommand list" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand list" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand assemble" -l dir -d 'Also look for members here: a directory or a path (repeatable); block devices are always looked at' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand assemble" -l config -d 'Serve only the arrays this file lists (default /etc/raidctl.conf, when it exists)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand assemble" -l timeout -d 'Seconds to wait for each daemon to answer (assembly may resync first)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand assemble" -l scan -d 'Look for arrays (required: the only mode so far)'
complete -c raidctl -n "__fish_raidctl_using_subcommand assemble" -l dry-run -d 'Say what would be served; start nothing. Each array is assembled read-only to check it: one whose assembly would be refused (a split brain, only stale members) is reported as would-fail, with the reason'
complete -c raidctl -n "__fish_raidctl_using_subcommand assemble" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand assemble" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c raidctl -n "__fish_raidctl_using_subcommand assemble" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand monitor" -l program -d 'Run PROGRAM for each event as `PROGRAM EVENT ARRAY-UUID MEMBER` (MEMBER empty when the event is about the whole array), with RAIDCTL_EVENT, RAIDCTL_ARRAY_UUID, RAIDCTL_ARRAY_NAME, RAIDCTL_SLOT, RAIDCTL_MEMBER, RAIDCTL_DETAIL, RAIDCTL_TIME and RAIDCTL_EVENT_JSON in its environment. It is given 60 s, then killed' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand monitor" -l mail -d 'Mail each event to ADDR through sendmail (/usr/sbin/sendmail, or RAIDCTL_SENDMAIL); refused when there is none' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand monitor" -l interval -d 'Seconds between looks at the event logs' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand monitor" -l scan -d 'Also look for offline arrays\' members here when checking which arrays are unhealthy (repeatable; block devices are always looked at)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand monitor" -l poll -d 'Seconds between checks of every array\'s state (a member file gone while nothing runs the array raises no event of its own); an array is reported when it turns unhealthy' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand monitor" -l coalesce -d 'Seconds over which repeated member-errors and bad-blocks events of one member are coalesced for the program and mail: the first at once, then one summary with the count per window (0: every event)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand monitor" -l mail-per-hour -d 'Most mails an hour for member-errors and bad-blocks; those past it are counted and named in the next mail (state changes are always mailed)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand monitor" -l oneshot -d 'Handle the events logged since the last run and report arrays unhealthy now, then exit (for a timer or cron job)'
complete -c raidctl -n "__fish_raidctl_using_subcommand monitor" -l json -d 'Print each event as one JSON object per line'
complete -c raidctl -n "__fish_raidctl_using_subcommand monitor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c raidctl -n "__fish_raidctl_using_subcommand monitor" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand clear" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand clear" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand clear" -l json -d 'What was done as JSON on stdout'
complete -c raidctl -n "__fish_raidctl_using_subcommand clear" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c raidctl -n "__fish_raidctl_using_subcommand clear" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand set" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand set" -l endurance -d 'Rated endurance in terabytes written (TBW from the data sheet)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand set" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand set" -l json -d 'What was done as JSON on stdout'
complete -c raidctl -n "__fish_raidctl_using_subcommand set" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand set" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand wipe" -l force -d 'Wipe a member that its array still counts on, or whose superblocks are corrupt'
complete -c raidctl -n "__fish_raidctl_using_subcommand wipe" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c raidctl -n "__fish_raidctl_using_subcommand wipe" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand examine" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand examine" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand examine" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -l inject -d 'Failure drill: inject a fault into a member for this run only, MEMBER:KIND[=VALUE]; kinds: read-errors=RANGE|PCT, write-errors=RANGE|PCT, latency=DUR[,JITTER], timeout-after=N, corrupt-on-read=PCT[@RANGE], vanish, full (repeatable; see raidctl-inject(8))' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -l member-timeout -d 'Give up on a member that has not answered a request for this long, and fail it (as the SCSI layer\'s command timeout does); 0 never gives up' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -s o -l offset -d 'Byte offset in the array (K/M/G suffixes allowed)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -s n -l length -d 'Bytes to read (default: to the end of the array)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -l output -d 'Write to this file instead of stdout' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -l inject -d 'Failure drill: inject a fault into a member for this run only, MEMBER:KIND[=VALUE]; kinds: read-errors=RANGE|PCT, write-errors=RANGE|PCT, latency=DUR[,JITTER], timeout-after=N, corrupt-on-read=PCT[@RANGE], vanish, full (repeatable; see raidctl-inject(8))' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -l member-timeout -d 'Give up on a member that has not answered a request for this long, and fail it (as the SCSI layer\'s command timeout does); 0 never gives up' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -s o -l offset -d 'Byte offset in the array (K/M/G suffixes allowed)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -s i -l input -d 'Read from this file instead of stdin' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand fail" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand fail" -l max-rate -d 'Rebuild at most this many bytes per second (K/M/G suffixes)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand fail" -l min-rate -d 'While clients\' requests are served, rebuild at this many bytes per second (it yields to them; full speed, or --max-rate, when they are idle; 0: never yield). Default 32M' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand fail" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand fail" -l no-rebuild -d 'Only record the change; run the rebuild later with `raidctl rebuild` (arrays no daemon serves: `raidctl serve` runs rebuilds itself, and refuses this)'
complete -c raidctl -n "__fish_raidctl_using_subcommand fail" -l json -d 'Progress as one JSON object per line on stdout, and a JSON summary'
complete -c raidctl -n "__fish_raidctl_using_subcommand fail" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand fail" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand remove" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand remove" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand remove" -l json -d 'What was done as JSON on stdout'
complete -c raidctl -n "__fish_raidctl_using_subcommand remove" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand remove" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand add" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand add" -l endurance -d 'Rated endurance of the new member in terabytes written' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand add" -l max-rate -d 'Rebuild at most this many bytes per second (K/M/G suffixes)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand add" -l min-rate -d 'While clients\' requests are served, rebuild at this many bytes per second (it yields to them; full speed, or --max-rate, when they are idle; 0: never yield). Default 32M' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand add" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand add" -s f -l force -d 'Overwrite a device that holds a file system or another array (never a mounted one)'
complete -c raidctl -n "__fish_raidctl_using_subcommand add" -l no-rebuild -d 'Only record the change; run the rebuild later with `raidctl rebuild` (arrays no daemon serves: `raidctl serve` runs rebuilds itself, and refuses this)'
complete -c raidctl -n "__fish_raidctl_using_subcommand add" -l json -d 'Progress as one JSON object per line on stdout, and a JSON summary'
complete -c raidctl -n "__fish_raidctl_using_subcommand add" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand add" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand replace" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand replace" -l endurance -d 'Rated endurance of the new member in terabytes written' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand replace" -l max-rate -d 'Rebuild at most this many bytes per second (K/M/G suffixes)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand replace" -l min-rate -d 'While clients\' requests are served, rebuild at this many bytes per second (it yields to them; full speed, or --max-rate, when they are idle; 0: never yield). Default 32M' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand replace" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand replace" -s f -l force -d 'Overwrite a device that holds a file system or another array (never a mounted one)'
complete -c raidctl -n "__fish_raidctl_using_subcommand replace" -l keep-roles -d 'Skewed arrays: replacing the parity-heavy member does not move the role to the most-worn member (by default it does: the new device takes over that member\'s slot, which then takes over the heavy slot, with redundancy kept throughout)'
complete -c raidctl -n "__fish_raidctl_using_subcommand replace" -l no-rebuild -d 'Only record the change; run the rebuild later with `raidctl rebuild` (arrays no daemon serves: `raidctl serve` runs rebuilds itself, and refuses this)'
complete -c raidctl -n "__fish_raidctl_using_subcommand replace" -l json -d 'Progress as one JSON object per line on stdout, and a JSON summary'
complete -c raidctl -n "__fish_raidctl_using_subcommand replace" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand replace" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand rebuild" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand rebuild" -l inject -d 'Failure drill: inject a fault into a member for this run only, MEMBER:KIND[=VALUE]; kinds: read-errors=RANGE|PCT, write-errors=RANGE|PCT, latency=DUR[,JITTER], timeout-after=N, corrupt-on-read=PCT[@RANGE], vanish, full (repeatable; see raidctl-inject(8))' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand rebuild" -l member-timeout -d 'Give up on a member that has not answered a request for this long, and fail it (as the SCSI layer\'s command timeout does); 0 never gives up' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand rebuild" -l max-rate -d 'Rebuild at most this many bytes per second (K/M/G suffixes)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand rebuild" -l min-rate -d 'While clients\' requests are served, rebuild at this many bytes per second (it yields to them; full speed, or --max-rate, when they are idle; 0: never yield). Default 32M' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand rebuild" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand rebuild" -l no-rebuild -d 'Only record the change; run the rebuild later with `raidctl rebuild` (arrays no daemon serves: `raidctl serve` runs rebuilds itself, and refuses this)'
complete -c raidctl -n "__fish_raidctl_using_subcommand rebuild" -l json -d 'Progress as one JSON object per line on stdout, and a JSON summary'
complete -c raidctl -n "__fish_raidctl_using_subcommand rebuild" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand rebuild" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and not __fish_seen_subcommand_from create detach" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and not __fish_seen_subcommand_from create detach" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and not __fish_seen_subcommand_from create detach" -f -a "create" -d 'Create COUNT sparse backing files in DIR and attach a loop device to each'
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and not __fish_seen_subcommand_from create detach" -f -a "detach" -d 'Detach loop devices, given by path or by the directory holding their backing files'
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and __fish_seen_subcommand_from create" -l dir -d 'Directory for the backing files (created if missing)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and __fish_seen_subcommand_from create" -l count -d 'Number of devices' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and __fish_seen_subcommand_from create" -l size -d 'Size of each backing file' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and __fish_seen_subcommand_from create" -l prefix -d 'Backing file name prefix' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and __fish_seen_subcommand_from create" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and __fish_seen_subcommand_from create" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and __fish_seen_subcommand_from detach" -l dir -d 'Detach every loop device whose backing file is in this directory' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and __fish_seen_subcommand_from detach" -l force -d 'Also detach devices a raidctl process holds (a served array\'s members): the array loses them'
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and __fish_seen_subcommand_from detach" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand loop; and __fish_seen_subcommand_from detach" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l scan -d 'Also look for members here (repeatable)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l smart -d 'SMART source: auto (run smartctl -j on member devices), none, or one smartctl -j file per member in slot order' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l window -d 'Days of history the write rate is fitted over' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l rebuild-rate -d 'Rebuild rate assumed for the collision threshold' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l horizon -d 'Days ahead the wear-out collision risk is counted over' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l endurance-spread -d 'Drive-to-drive spread of the life left, in percent (a coefficient of variation), in the collision risk' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l plot -d 'Draw each member\'s wear history and forecast (range band, wear-outs, rebuild window) to this SVG file' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l collision-days -d 'Warn when the two earliest wear-outs are closer than this many days (default: max(30, 3 x estimated rebuild time))' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l prometheus -d 'Print node_exporter textfile metrics (Prometheus text format)'
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l check -d 'Exit 0 ok / 1 warning / 2 critical / 3 unknown (any error), with the reasons on stderr'
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -l record -d 'Also record a history sample now (with the SMART values read); opens the array for writing'
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and not __fish_seen_subcommand_from plan" -a "plan" -d 'Say what parity weights can do for the measured write mix, and plan replacements that keep wear-outs DAYS apart'
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l target-gap -d 'The gap wanted between consecutive wear-outs or replacements, in days' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l rate -d 'User writes per day (K/M/G/T suffixes); default: the rate measured from the history' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l skew -d 'Plan replacements as if the array had these parity weights (default: its own)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l years -d 'Years to plan replacements for (default: until every member now in the array is replaced)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l scan -d 'Also look for members here (repeatable)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l smart -d 'SMART source: auto (run smartctl -j on member devices), none, or one smartctl -j file per member in slot order' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l window -d 'Days of history the write rate is fitted over' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l rebuild-rate -d 'Rebuild rate assumed for the collision threshold' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l horizon -d 'Days ahead the wear-out collision risk is counted over' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l endurance-spread -d 'Drive-to-drive spread of the life left, in percent (a coefficient of variation), in the collision risk' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l keep-roles -d 'Do not move the parity-heavy role to the most-worn survivor when its member is replaced'
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -l json -d 'Print JSON (the input of `raidctl simulate --plan`)'
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c raidctl -n "__fish_raidctl_using_subcommand wear; and __fish_seen_subcommand_from plan" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l plan -d 'Replay this plan (`raidctl wear plan --json` output)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l level -d 'RAID level: 0, 1, 5, 6, 10 or f1' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l members -d 'Number of members' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l skew -d 'Parity weights (f1)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l endurance -d 'Rated endurance of each member in terabytes written' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l capacity -d 'Member capacity (a rebuild writes this much)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l workload -d 'rand4k, seq, mix:PCT (percent of bytes as random 4 KiB writes) or k:K (data bytes per parity byte); default rand4k, or the plan\'s measured mix' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l mix-of -d 'Take the workload from an array\'s measured write mix (its data bytes per parity byte)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l rate -d 'User writes per day in GB (10^9 bytes)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l years -d 'Years to simulate (default 10, or the plan\'s horizon and one target gap more)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l replace-at -d 'Replace a member when it reaches this percent of its endurance (unless scheduled)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l plot -d 'Draw per-member wear over time to this SVG file' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l keep-roles -d 'Do not move the parity-heavy role on replacement'
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c raidctl -n "__fish_raidctl_using_subcommand simulate" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand inspect" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand inspect" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand inspect" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -l read-errors -d 'Reads fail with EIO: over a byte range of the member (START-END or START+LEN; each block heals when rewritten, as an SSD remaps a bad sector) or on a share of requests (PCT%)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -l write-errors -d 'Writes fail with EIO, over a byte range or on a share of requests' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -l latency -d 'Every request waits this long, plus a random share of JITTER (e.g. 20ms,10ms)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -l timeout-after -d 'After N more requests every request hangs, as a dying drive\'s do, until --clear, or until the member timeout of `raidctl serve` fails the member' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -l corrupt-on-read -d 'This share of the member\'s 4 KiB blocks (of a byte range with @START-END) has rotted: one bit flips on every read until the block is rewritten (the checksums must catch it)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -l vanish -d 'The device disappears: every request fails (ENXIO)'
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -l return -d 'A vanished device comes back; if the array failed it meanwhile, it is added back as stale and rebuilt'
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -l full -d 'Writes fail with ENOSPC (a thin-provisioned or full device)'
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -l clear -d 'Remove every fault of MEMBER (of every member without MEMBER), and forget rotten blocks'
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -l json -d 'Print the result as JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand inject" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand drill" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand drill" -l member-timeout -d 'Give up on (and fail) a member that has not answered for this long' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand drill" -l size -d 'Size of the region at the start of the array the workload writes (saved first and put back at the end)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand drill" -l spare -d 'smart-replacement: the device that replaces the most worn member (it stays in the array; the worn one leaves it)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand drill" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand drill" -l restore -d 'Put back the region an interrupted drill saved (in STATE_DIR/drills), and nothing else'
complete -c raidctl -n "__fish_raidctl_using_subcommand drill" -l force -d 'smart-replacement: overwrite a spare that holds a file system or another array'
complete -c raidctl -n "__fish_raidctl_using_subcommand drill" -l json -d 'Print the report as JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand drill" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c raidctl -n "__fish_raidctl_using_subcommand drill" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l inject -d 'Failure drill: inject a fault into a member for this run only, MEMBER:KIND[=VALUE]; kinds: read-errors=RANGE|PCT, write-errors=RANGE|PCT, latency=DUR[,JITTER], timeout-after=N, corrupt-on-read=PCT[@RANGE], vanish, full (repeatable; see raidctl-inject(8))' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l member-timeout -d 'Give up on a member that has not answered a request for this long, and fail it (as the SCSI layer\'s command timeout does); 0 never gives up' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l socket -d 'Unix socket to listen on (default /run/raidctl/UUID.sock, mode 0600)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l listen -d 'Also listen on TCP (only where you name it, e.g. 127.0.0.1:10809)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l export -d 'Export name' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l max-rate -d 'Background rebuilds write at most this many bytes per second, leaving room for clients' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l min-rate -d 'Background rebuilds and scrubs run at this many bytes per second while clients\' requests are served (full speed, or --max-rate, when clients are idle; 0: never yield). Default 32M' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l wait-for-members -d 'Wait up to this many seconds for members not found yet (a disk slow to appear at boot) before serving without them: a member that arrives late joins at once instead of coming back stale (0: do not wait; at most a week)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l stripe-cache -d 'Memory for partial-row writes held until their row is complete (parity levels; 0 turns the stripe cache off)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l nbd-device -d 'Also attach the export to this kernel\'s nbd driver as DEVICE (e.g. /dev/nbd0, after modprobe nbd): a block device to mkfs and mount, no nbd-client needed. Detached on SIGTERM or SIGINT (unmount first). Implies --harden' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l ublk-id -d 'ublk device number to create, or to take over when its daemon died (default: the first free one)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l queues -d 'ublk hardware queues, each served by its own thread' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l queue-depth -d 'Requests in flight per ublk queue' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l readonly -d 'Export read-only'
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l foreground -d 'Accepted for compatibility and ignored: serve always runs in the foreground until SIGTERM or SIGINT (run it under systemd, contrib/raidctl-serve@.service, or with &)'
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l keep-roles -d 'Skewed arrays: do not move the parity-heavy role when members are replaced'
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l ublk -d 'Also serve the array as a ublk block device, /dev/ublkbN (Linux 6.0+, modprobe ublk_drv): no NBD in the way. If the daemon dies, the device and what is mounted on it wait (I/O is queued); start serve again with --ublk-id N to take it over. Removed on SIGTERM or SIGINT (unmount first). Writes through (no --stripe-cache: what a dying daemon acknowledged must already be in the kernel). Implies --harden'
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -l harden -d 'Harden the daemon for serving file systems this host depends on: PR_SET_IO_FLUSHER, all of its memory locked (mlockall), OOM score adjustment -900; each one a warning when refused (they need root)'
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c raidctl -n "__fish_raidctl_using_subcommand serve" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand scrub" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand scrub" -l inject -d 'Failure drill: inject a fault into a member for this run only, MEMBER:KIND[=VALUE]; kinds: read-errors=RANGE|PCT, write-errors=RANGE|PCT, latency=DUR[,JITTER], timeout-after=N, corrupt-on-read=PCT[@RANGE], vanish, full (repeatable; see raidctl-inject(8))' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand scrub" -l member-timeout -d 'Give up on a member that has not answered a request for this long, and fail it (as the SCSI layer\'s command timeout does); 0 never gives up' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand scrub" -l max-rate -d 'Read at most this many bytes per second' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand scrub" -l min-rate -d 'While clients\' requests are served, read at this many bytes per second (the scrub yields to them; full speed, or --max-rate, when they are idle; 0: never yield). Default 32M' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand scrub" -l force-assemble -d 'Bring up an array that has failed because a storm of write errors (ENOSPC, a flaky cable) failed more members than it tolerates: take back the most recently failed members that are present until it runs (as mdadm --assemble --force). Writes they missed after failing are lost; a writable open resyncs every row. Also keeps the named half of a split brain (members each assembled without the other): the other half\'s own writes are lost when it is added back'
complete -c raidctl -n "__fish_raidctl_using_subcommand scrub" -l repair -d 'Rewrite what is wrong where the right content can be decided'
complete -c raidctl -n "__fish_raidctl_using_subcommand scrub" -l include-empty -d 'Also check the regions never written since create (or trimmed whole), which a scrub skips: they should hold zeros on every member, and this finds rot there'
complete -c raidctl -n "__fish_raidctl_using_subcommand scrub" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand scrub" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand scrub" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -l profile -d 'Benchmark profile: cdm (SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1; read and write)' -r -f -a "cdm\t''"
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -l tests -d 'Only these tests of the profile, comma-separated (e.g. rnd4k-q32t1-write)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -l size -d 'Size of the test region at the start of the array' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -l duration -d 'Time per test' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -l iops-limit -d 'Pace each test to at most this many requests per second (to see the write amplification of a lightly loaded array)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -l stripe-cache -d 'Memory for partial-row writes held until their row is complete (parity levels; 0 turns the stripe cache off)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -l data -d 'Data chunks per row' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -l parity -d 'Parity kernel throughput, single core, no array needed'
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -l hash -d 'Checksum hash throughput over 4 KiB blocks, single core, no array needed'
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -l destructive -d 'The test region may be overwritten: do not save and restore it'
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand bench" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -l levels -d 'Over-provisioning levels to measure, percent of the device, comma-separated' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -l target-iops -d 'Recommend the smallest level that sustains this many 4 KiB random-write IOPS (without it: the knee of the curve)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -l time-per-level -d 'Longest time spent on one level when it does not reach steady state' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -l round -d 'Length of one measurement round (SNIA: one minute)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -l max-rounds -d 'Most rounds on one level (SNIA: 25)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -l queue-depth -d 'Writes in flight (one thread each, O_DIRECT)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -l plot -d 'Write the curve as an SVG plot' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -l no-precondition -d 'Skip the two sequential fills (only when the device was filled just before)'
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -l no-save -d 'Do not save the result for `create --overprovision auto`'
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -s f -l force -d 'Profile a device that holds a file system, a partition table or an array member (never a mounted or busy one)'
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -l json -d 'Print the result as JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand profile" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand completions" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand completions" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand generate" -l man -d 'Output directory for man pages (raidctl.8, raidctl-SUBCOMMAND.8)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand generate" -l completions -d 'Output directory for completions (bash, zsh, fish)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand generate" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand generate" -s V -l version -d 'Print version'
