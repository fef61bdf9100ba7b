#!/usr/bin/env bash
# Dependencies point one way (docs: ARCHITECTURE): a module may include only
# the public headers of the modules below it. Fails naming each violation.
# offpath/mode.h is header-only vocabulary (the mode names) shared by the
# launcher, the MPI library and the CLI; offpath/mpi.h is what the library
# exports to MPI programs (src/mpiapps: the osu ones, dpa_all_to_all).
set -u
cd "$(dirname "$0")/.."
declare -A allowed=(
    [common]="common"
    [wire]="common wire"
    [reduce]="common wire reduce"
    [shmcoll]="common wire reduce shmcoll"
    [io]="common wire io"
    [loop]="common wire io loop"
    [switch]="common wire reduce io loop topo nstopo switch"
    [inc]="common wire reduce io loop inc"
    [rdma]="common wire io loop rdma"
    [gpu]="common wire io loop rdma gpu"
    [perf]="common wire io loop rdma gpu perf"
    [hostar]="common wire reduce io loop hostar"
    [rescue]="common wire io loop rescue"
    [agent]="common wire reduce io loop rdma channel agent"
    [fabric]="common wire reduce io topo switch fabric"
    [mpi]="common wire reduce io topo inc shmcoll hostar rescue agent osu mode mpi"
    [mpiapps]="common wire channel agent osu mpi"
    [inctest]="common wire reduce io topo switch inc fabric nstopo inctest"
    [launch]="common wire reduce io topo switch fabric mode launch nstopo"
    [channel]="common wire io channel"
    [dns]="common wire io loop dns"
    [model]="common model"
    [nstopo]="common nstopo"
    [cli]="common wire reduce io topo switch inc rdma gpu perf agent fabric inctest mode launch osu channel dns model nstopo"
)
bad=0
for dir in src/*/; do
    mod=$(basename "$dir")
    ok=${allowed[$mod]:-}
    if [ -z "$ok" ]; then
        echo "layering: module '$mod' has no entry in tests/check_layering.sh"
        bad=1
        continue
    fi
    while IFS=: read -r file _ inc; do
        dep=$(echo "$inc" | sed -n 's/.*"offpath\/\([a-z_]*\)[./].*/\1/p')
        [ -z "$dep" ] && continue
        case " $ok " in *" $dep "*) ;; *) echo "layering: $file includes offpath/$dep.h"; bad=1 ;; esac
    done < <(grep -n '#include "offpath/' "$dir"*.c "$dir"*.h 2>/dev/null)
    if grep -n '#include "\.\./' "$dir"*.c "$dir"*.h 2>/dev/null; then
        echo "layering: $mod reaches into another module's internals"
        bad=1
    fi
done
# Only cli parses arguments (ARCHITECTURE.md): below it, settings arrive filled in.
if grep -n 'getopt' src/*/*.c | grep -v '^src/cli/'; then
    echo "layering: argument parsing outside src/cli"
    bad=1
fi
# Settings reach modules in structs filled by src/cli; liboffpath_mpi, which
# has no other channel (it is preloaded), reads its variables in one place.
if grep -n 'getenv' src/*/*.c src/*/*.h | grep -v '^src/cli/\|^src/mpi/env\.c:'; then
    echo "layering: getenv outside src/cli and src/mpi/env.c"
    bad=1
fi
# Libraries return errors (STYLE.md): a failed MPI call falls back or returns
# the MPI's error, the ranks never die of abort() (op_inc_eng_cancel is named so).
if grep -n 'abort(' src/*/*.c src/*/*.h; then
    echo "layering: abort( in src/"
    bad=1
fi
# Libraries return errors: only src/cli decides a process's exit status
# (a forked child leaves with _exit).
if grep -nE '\bexit\(' src/*/*.c | grep -v '^src/cli/'; then
    echo "layering: exit( below src/cli"
    bad=1
fi
# Inside liboffpath_mpi, levels (src/mpi/mpi_base.h): each file includes
# the header of its level, never one above, so calls go down only.
mpi_levels=(mpi_base.h mpi_comm.h mpi_node.h mpi_coll.h mpi_nb.h)
declare -A mpi_file_level=(
    [env.c]=0 [identity.c]=0 [types.c]=0 [setup.c]=1 [node.c]=2 [hostpath.c]=2 [settle.c]=2
    [progress.c]=2 [allreduce.c]=3 [requests.c]=3 [iallreduce.c]=4 [alltoall.c]=4
    [iar_persist.c]=4 [iar_requests.c]=4 [wrap.c]=4
    [mpi_base.h]=0 [mpi_comm.h]=1 [mpi_node.h]=2 [mpi_coll.h]=3 [mpi_nb.h]=4)
for f in src/mpi/*.c src/mpi/*.h; do
    name=$(basename "$f")
    level=${mpi_file_level[$name]:-}
    if [ -z "$level" ]; then
        echo "layering: src/mpi/$name has no level in tests/check_layering.sh"
        bad=1
        continue
    fi
    for inc in $(sed -n 's/^#include "\(mpi_[a-z]*\.h\)".*/\1/p' "$f"); do
        for i in "${!mpi_levels[@]}"; do
            if [ "${mpi_levels[$i]}" = "$inc" ] && [ "$i" -gt "$level" ]; then
                echo "layering: src/mpi/$name (level $level) includes $inc (level $i)"
                bad=1
            fi
        done
    done
done
# One I/O layer (ARCHITECTURE.md): waits on descriptors and receives live
# in src/io and src/loop; everything else uses their helpers, backends and
# driver.
if grep -nE '(^|[^.>[:alnum:]_])(poll|ppoll|epoll_wait|recvmmsg|rte_eth_rx_burst|rte_eth_tx_burst)\s*\(' src/*/*.c |
    grep -v -e '^src/io/' -e '^src/loop/' | grep -vE '^[^:]+:[0-9]+:\s*(\*|//|/\*)|"[^"]*(poll|recvmmsg)'; then
    echo "layering: a wait or receive loop outside src/io and src/loop"
    bad=1
fi
# Sizes the architecture holds to: a public header under 400 lines (a
# protocol that outgrows it gets its own under the module's folder), a file
# of src/cli under 350 (flags to a config struct, no more).
for f in include/offpath/*.h include/offpath/*/*.h; do
    [ "$(wc -l < "$f")" -le 400 ] || { echo "layering: $f is over 400 lines"; bad=1; }
done
for f in src/cli/*.c; do
    [ "$(wc -l < "$f")" -le 350 ] || { echo "layering: $f is over 350 lines"; bad=1; }
done
[ $bad -eq 0 ] && echo "layering: ok"
exit $bad
