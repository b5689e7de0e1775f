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
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "examine" -d 'Show the superblock of one member'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "read" -d 'Read bytes from an array (to stdout by default)'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "write" -d 'Write bytes into an array (from stdin by default); flushed before it returns'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "completions" -d 'Print shell completions'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "generate" -d 'Generate man pages and completions into a directory (for packaging)'
complete -c raidctl -n "__fish_raidctl_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s l -l level -d 'RAID level: 0, 1, 5, 6, 10 or f1 (RAID 5 with parity skewed onto one member)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s c -l chunk -d 'Chunk size (power of two, 4K to 16M)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s n -l name -d 'Array name' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l skew -d 'Parity weights, one per member (f1; e.g. 16,1,1,1,1); implies --level f1 semantics' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l parity-heavy -d 'F1: the slot that takes the extra parity' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l copies -d 'RAID10: copies of each chunk (near layout)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l size -d 'Create missing member files, or extend smaller ones, to this size' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l overprovision -d 'Percent of each member left unused at the tail and discarded (SSD overprovisioning)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l endurance -d 'Rated endurance in terabytes written, one value for all members or one per member' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s f -l force -d 'Overwrite members that hold a file system or another array (never a mounted or busy one)'
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -l json -d 'Print the new array\'s status as JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand create" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand status" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand status" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand status" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand status" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand examine" -l json -d 'Print JSON'
complete -c raidctl -n "__fish_raidctl_using_subcommand examine" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand examine" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -s o -l offset -d 'Byte offset in the array (K/M/G suffixes allowed)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -s n -l length -d 'Bytes to read (default: to the end of the array)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -l output -d 'Write to this file instead of stdout' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand read" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -l scan -d 'Also look for members here: a directory (every file and block device in it) or a path; repeatable, e.g. --scan /srv/raid or --scan /dev/loop3' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -s o -l offset -d 'Byte offset in the array (K/M/G suffixes allowed)' -r
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -s i -l input -d 'Read from this file instead of stdin' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand write" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand completions" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand completions" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand generate" -l man -d 'Output directory for man pages (raidctl.8, raidctl-SUBCOMMAND.8)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand generate" -l completions -d 'Output directory for completions (bash, zsh, fish)' -r -F
complete -c raidctl -n "__fish_raidctl_using_subcommand generate" -s h -l help -d 'Print help'
complete -c raidctl -n "__fish_raidctl_using_subcommand generate" -s V -l version -d 'Print version'
complete -c raidctl -n "__fish_raidctl_using_subcommand help; and not __fish_seen_subcommand_from create status examine read write completions generate help" -f -a "create" -d 'Create an array over MEMBERs (files or block devices)'
complete -c raidctl -n "__fish_raidctl_using_subcommand help; and not __fish_seen_subcommand_from create status examine read write completions generate help" -f -a "status" -d 'Show an array\'s state and its members'
complete -c raidctl -n "__fish_raidctl_using_subcommand help; and not __fish_seen_subcommand_from create status examine read write completions generate help" -f -a "examine" -d 'Show the superblock of one member'
complete -c raidctl -n "__fish_raidctl_using_subcommand help; and not __fish_seen_subcommand_from create status examine read write completions generate help" -f -a "read" -d 'Read bytes from an array (to stdout by default)'
complete -c raidctl -n "__fish_raidctl_using_subcommand help; and not __fish_seen_subcommand_from create status examine read write completions generate help" -f -a "write" -d 'Write bytes into an array (from stdin by default); flushed before it returns'
complete -c raidctl -n "__fish_raidctl_using_subcommand help; and not __fish_seen_subcommand_from create status examine read write completions generate help" -f -a "completions" -d 'Print shell completions'
complete -c raidctl -n "__fish_raidctl_using_subcommand help; and not __fish_seen_subcommand_from create status examine read write completions generate help" -f -a "generate" -d 'Generate man pages and completions into a directory (for packaging)'
complete -c raidctl -n "__fish_raidctl_using_subcommand help; and not __fish_seen_subcommand_from create status examine read write completions generate help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
