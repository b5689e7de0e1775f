_raidctl() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="raidctl"
                ;;
            raidctl,add)
                cmd="raidctl__subcmd__add"
                ;;
            raidctl,assemble)
                cmd="raidctl__subcmd__assemble"
                ;;
            raidctl,bench)
                cmd="raidctl__subcmd__bench"
                ;;
            raidctl,clear)
                cmd="raidctl__subcmd__clear"
                ;;
            raidctl,completions)
                cmd="raidctl__subcmd__completions"
                ;;
            raidctl,create)
                cmd="raidctl__subcmd__create"
                ;;
            raidctl,drill)
                cmd="raidctl__subcmd__drill"
                ;;
            raidctl,examine)
                cmd="raidctl__subcmd__examine"
                ;;
            raidctl,fail)
                cmd="raidctl__subcmd__fail"
                ;;
            raidctl,generate)
                cmd="raidctl__subcmd__generate"
                ;;
            raidctl,inject)
                cmd="raidctl__subcmd__inject"
                ;;
            raidctl,inspect)
                cmd="raidctl__subcmd__inspect"
                ;;
            raidctl,list)
                cmd="raidctl__subcmd__list"
                ;;
            raidctl,loop)
                cmd="raidctl__subcmd__loop"
                ;;
            raidctl,monitor)
                cmd="raidctl__subcmd__monitor"
                ;;
            raidctl,profile)
                cmd="raidctl__subcmd__profile"
                ;;
            raidctl,read)
                cmd="raidctl__subcmd__read"
                ;;
            raidctl,rebuild)
                cmd="raidctl__subcmd__rebuild"
                ;;
            raidctl,remove)
                cmd="raidctl__subcmd__remove"
                ;;
            raidctl,replace)
                cmd="raidctl__subcmd__replace"
                ;;
            raidctl,scrub)
                cmd="raidctl__subcmd__scrub"
                ;;
            raidctl,serve)
                cmd="raidctl__subcmd__serve"
                ;;
            raidctl,set)
                cmd="raidctl__subcmd__set"
                ;;
            raidctl,simulate)
                cmd="raidctl__subcmd__simulate"
                ;;
            raidctl,status)
                cmd="raidctl__subcmd__status"
                ;;
            raidctl,wear)
                cmd="raidctl__subcmd__wear"
                ;;
            raidctl,wipe)
                cmd="raidctl__subcmd__wipe"
                ;;
            raidctl,write)
                cmd="raidctl__subcmd__write"
                ;;
            raidctl__subcmd__loop,create)
                cmd="raidctl__subcmd__loop__subcmd__create"
                ;;
            raidctl__subcmd__loop,detach)
                cmd="raidctl__subcmd__loop__subcmd__detach"
                ;;
            raidctl__subcmd__wear,plan)
                cmd="raidctl__subcmd__wear__subcmd__plan"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        raidctl)
            opts="-h -V --help --version create status list assemble monitor clear set wipe examine read write fail remove add replace rebuild loop wear simulate inspect inject drill serve scrub bench profile completions generate"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__add)
            opts="-f -h -V --scan --force-assemble --force --endurance --max-rate --min-rate --no-rebuild --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --endurance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__assemble)
            opts="-h -V --scan --dir --config --dry-run --timeout --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__bench)
            opts="-h -V --parity --hash --profile --tests --size --duration --iops-limit --destructive --stripe-cache --data --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --profile)
                    COMPREPLY=($(compgen -W "cdm" -- "${cur}"))
                    return 0
                    ;;
                --tests)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --duration)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --iops-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stripe-cache)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --data)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__clear)
            opts="-h -V --scan --force-assemble --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__completions)
            opts="-h -V --help --version bash elvish fish powershell zsh"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__create)
            opts="-l -c -n -f -h -V --level --chunk --name --skew --parity-heavy --copies --size --overprovision --endurance --history-interval --checksum --no-checksums --bitmap-chunk --force --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -l)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --chunk)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --skew)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --parity-heavy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --copies)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --overprovision)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --endurance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --history-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --checksum)
                    COMPREPLY=($(compgen -W "xxh3 blake3" -- "${cur}"))
                    return 0
                    ;;
                --bitmap-chunk)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__drill)
            opts="-h -V --scan --force-assemble --restore --member-timeout --size --spare --force --json --help --version bad-sectors-during-rebuild second-failure-during-rebuild bit-rot slow-member vanish-and-return smart-replacement"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --member-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spare)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__examine)
            opts="-h -V --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__fail)
            opts="-h -V --scan --force-assemble --max-rate --min-rate --no-rebuild --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__generate)
            opts="-h -V --man --completions --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --man)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --completions)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__inject)
            opts="-h -V --read-errors --write-errors --latency --timeout-after --corrupt-on-read --vanish --return --full --clear --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --read-errors)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --write-errors)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --latency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --corrupt-on-read)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__inspect)
            opts="-h -V --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__list)
            opts="-h -V --scan --json --prometheus --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__loop)
            opts="-h -V --help --version create detach"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__loop__subcmd__create)
            opts="-h -V --dir --count --size --prefix --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --count)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__loop__subcmd__detach)
            opts="-h -V --dir --force --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__monitor)
            opts="-h -V --program --mail --oneshot --interval --scan --poll --json --coalesce --mail-per-hour --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --program)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mail)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --poll)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --coalesce)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mail-per-hour)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__profile)
            opts="-f -h -V --levels --target-iops --time-per-level --round --max-rounds --queue-depth --no-precondition --plot --no-save --force --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --levels)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --target-iops)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --time-per-level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --round)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-rounds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --queue-depth)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__read)
            opts="-o -n -h -V --scan --force-assemble --inject --member-timeout --offset --length --output --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inject)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --member-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --length)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__rebuild)
            opts="-h -V --scan --force-assemble --inject --member-timeout --max-rate --min-rate --no-rebuild --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inject)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --member-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__remove)
            opts="-h -V --scan --force-assemble --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__replace)
            opts="-f -h -V --scan --force-assemble --force --endurance --keep-roles --max-rate --min-rate --no-rebuild --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --endurance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__scrub)
            opts="-h -V --scan --force-assemble --inject --member-timeout --repair --max-rate --min-rate --include-empty --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inject)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --member-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__serve)
            opts="-h -V --scan --force-assemble --inject --member-timeout --socket --listen --export --readonly --foreground --max-rate --min-rate --keep-roles --wait-for-members --stripe-cache --nbd-device --ublk --ublk-id --queues --queue-depth --harden --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inject)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --member-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --export)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --wait-for-members)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stripe-cache)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --nbd-device)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ublk-id)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --queues)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --queue-depth)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__set)
            opts="-h -V --scan --force-assemble --endurance --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --endurance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__simulate)
            opts="-h -V --plan --level --members --skew --endurance --capacity --workload --mix-of --rate --years --replace-at --keep-roles --json --plot --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --plan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --members)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --skew)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --endurance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --capacity)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --workload)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mix-of)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --years)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --replace-at)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__status)
            opts="-h -V --scan --force-assemble --json --prometheus --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__wear)
            opts="-h -V --scan --smart --window --rebuild-rate --horizon --endurance-spread --json --prometheus --check --record --plot --collision-days --help --version plan"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --smart)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --window)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rebuild-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --horizon)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --endurance-spread)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --collision-days)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__wear__subcmd__plan)
            opts="-h -V --target-gap --rate --skew --years --keep-roles --scan --smart --window --rebuild-rate --horizon --endurance-spread --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --target-gap)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --skew)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --years)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --smart)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --window)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rebuild-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --horizon)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --endurance-spread)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__wipe)
            opts="-h -V --force --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        raidctl__subcmd__write)
            opts="-o -i -h -V --scan --force-assemble --inject --member-timeout --offset --input --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --scan)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inject)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --member-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --offset)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --input)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _raidctl -o nosort -o bashdefault -o default raidctl
else
    complete -F _raidctl -o bashdefault -o default raidctl
fi
