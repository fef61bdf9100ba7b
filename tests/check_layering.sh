#!/usr/bin/env bash
# Dependencies point one way (docs: ARCHITECTURE): a module may include only
# the public headers of the modules below it. Fails naming each violation.
# offpath/mode.h is header-only vocabulary (the mode names) shared by the
# launcher, the MPI library and the CLI; offpath/mpi.h is what the library
# exports to MPI programs (the osu ones live in src/mpi).
set -u
cd "$(dirname "$0")/.."
declare -A allowed=(
    [common]="common"
    [wire]="common wire"
    [reduce]="common wire reduce"
    [shmcoll]="common wire reduce shmcoll"
    [io]="common wire io"
    [loop]="common wire io loop"
    [switch]="common wire reduce io loop topo switch"
    [inc]="common wire reduce io loop inc"
    [rdma]="common wire io loop rdma"
    [gpu]="common wire io loop rdma gpu"
    [perf]="common wire io loop rdma gpu perf"
    [hostar]="common wire reduce io loop hostar"
    [rescue]="common wire rescue"
    [agent]="common wire reduce io loop rdma channel agent"
    [fabric]="common wire reduce io topo switch fabric"
    [mpi]="common wire reduce io topo inc shmcoll hostar rescue agent osu mode mpi"
    [inctest]="common wire reduce io topo switch inc fabric inctest"
    [launch]="common wire reduce io topo switch fabric mode launch"
    [channel]="common channel"
    [dns]="common wire io dns"
    [model]="common model"
    [cli]="common wire reduce io topo switch inc rdma gpu perf agent fabric inctest mode launch osu channel dns model"
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
        dep=$(echo "$inc" | sed -n 's/.*"offpath\/\([a-z_]*\)\.h".*/\1/p')
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
[ $bad -eq 0 ] && echo "layering: ok"
exit $bad
