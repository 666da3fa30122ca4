#!/usr/bin/env bash
# `make dryrun`: build do-nothing stand-ins for the CANN shared libraries that the PyPI mindspore
# wheel's Ascend plugin is linked against (libge_runner.so, libgraph.so, libascendcl.so, ...), so that
# libmindspore_ascend.so.2 can be dlopen'ed on a machine without CANN, and MindSpore DryRun
# (MS_SIMULATION_LEVEL=1, kernel-by-kernel) can run. Every missing symbol becomes a function that returns 0
# (ACL ...Create... calls: a zeroed block; singletons: a zeroed static object); the few GE value types whose
# callers inline code (StatusFactory, AscendString, Operator, TensorDesc) are in cann_stub_special.cc.
# cann_stub_special.cc also returns a SoC name (aclrtGetSocName) and a CANN version (aclsysGetCANNVersion), which
# only the legacy (use_legacy: True) Llama graph asks for.
# Under DryRun level 1 MindSpore mocks the ACL runtime itself; a trace (CANN_STUB_TRACE=1) of a Qwen3-32B run
# shows only GE op-proto registration, aclInit/aclnnInit/aclnnFinalize and aclopCreateAttr/aclopSetAttrInt
# reaching these stand-ins. These are stand-ins, not CANN: nothing can execute on them (docs/estimate.md, "DryRun L1").
#
# usage: VENV=path/to/venv ./make_cann_stubs.sh OUTDIR     (needs gcc/g++, nm, strings, ldd)
#   then run with LD_LIBRARY_PATH=OUTDIR/latest/lib64 PYTHONPATH=OUTDIR/python (set at process start).
set -euo pipefail
OUT=${1:?usage: VENV=venv make_cann_stubs.sh OUTDIR}
PY=${VENV:?set VENV}/bin/python
MS=$($PY -c 'import mindspore, os; print(os.path.dirname(mindspore.__file__))' 2>/dev/null | tail -1)
LIB=$MS/lib
mkdir -p "$OUT"
SYSLIBS=$(ldd "$LIB/libmindspore_core.so" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}')
# every symbol some mindspore / system library defines
ALLPLUG=$(find "$LIB/plugin" -name '*.so*' -type f | grep -v 'gpu' | sort)
{ for f in "$LIB"/*.so* $ALLPLUG "$MS"/_c_*.so $SYSLIBS; do
    nm -D --defined-only "$f" 2>/dev/null | awk '{print $3}'; done; } | sed 's/@.*//' | sort -u > "$OUT/defined.txt"
# every symbol the Ascend plugin chain needs
PLUG="$ALLPLUG $LIB/libmindspore_ge_backend.so"
for f in $PLUG; do nm -D --undefined-only "$f" | awk '{print $2}'; done | sed 's/@.*//' | sort -u > "$OUT/undefined.txt"
comm -23 "$OUT/undefined.txt" "$OUT/defined.txt" | grep -vE '^_?Py|^_ITM_|^__gmon_start__|^__gcov_|^_ZTH' > "$OUT/missing.txt"
# sonames that are not found
# only the sonames that no file of the wheel provides (the CANN ones); wheel-internal ones are left alone
SONAMES=$(for f in $PLUG; do ldd "$f" 2>/dev/null | awk '/not found/{print $1}'; done | sort -u |
  while read -r so; do [ -z "$(find "$MS" -name "$so*" -print -quit)" ] && echo "$so"; done || true)
# names the plugin dlsym()s at run time (ACL, aclnn kernels with their ...GetWorkspaceSize twins, HCCL,
# runtime): taken from the strings of the wheel's libraries
for f in $ALLPLUG "$LIB"/*.so*; do strings -n 6 "$f"; done |
  grep -oE '^(aclnn[A-Za-z0-9_]+|acl[a-z]*[A-Z][A-Za-z0-9_]*|[Hh]ccl[A-Z][A-Za-z0-9]+|rt[A-Z][A-Za-z0-9]+|Nnopbase[A-Za-z]+)$' |
  sort -u > "$OUT/dlsym.txt"
{ cat "$OUT/missing.txt" "$OUT/dlsym.txt"; grep '^aclnn' "$OUT/dlsym.txt" | grep -v 'GetWorkspaceSize$' | sed 's/$/GetWorkspaceSize/'; } |
  sort -u | comm -23 - "$OUT/defined.txt" > "$OUT/missing.all.txt"
mv "$OUT/missing.all.txt" "$OUT/missing.txt"
HERE=$(cd "$(dirname "$0")" && pwd)
g++ -c -fPIC -O1 -D_GLIBCXX_USE_CXX11_ABI=0 -o "$OUT/special.o" "$HERE/cann_stub_special.cc"
nm --defined-only "$OUT/special.o" | awk '$2 ~ /[TW]/{print $3}' > "$OUT/special.txt"
grep -vxF -f "$OUT/special.txt" "$OUT/missing.txt" > "$OUT/generic.txt" || true
# ACL ...Create... calls return a fresh zeroed block, singletons (...Instance()) a distinct zero-filled
# 64 KiB block, everything else returns 0 (= success / nullptr). CANN_STUB_TRACE=1 prints each call's name.
{ i=0
  while read -r s; do
    printf '.section .rodata\n.Lname%d: .asciz "%s"\n' "$i" "$s"
    if [[ $s =~ ^(acl|aclop|acltdt|aclprof|aclmdl)Create ]]; then
      # ACL host-side descriptor constructors (aclCreateTensorDesc, aclopCreateAttr, ...): a fresh zeroed block
      printf '.text\n.globl %s\n.type %s,@function\n%s:\n  leaq .Lname%d(%%rip),%%rdi\n  jmp cann_stub_calloc@PLT\n' "$s" "$s" "$s" "$i"
    elif [[ $s == *Instance* ]]; then
      printf '.bss\n.align 64\n.Lobj%d: .zero 65536\n' "$i"
      printf '.text\n.globl %s\n.type %s,@function\n%s:\n  leaq .Lname%d(%%rip),%%rdi\n  leaq .Lobj%d(%%rip),%%rsi\n  jmp cann_stub_ptr@PLT\n' "$s" "$s" "$s" "$i" "$i"
    else
      printf '.text\n.globl %s\n.type %s,@function\n%s:\n  leaq .Lname%d(%%rip),%%rdi\n  jmp cann_stub_zero@PLT\n' "$s" "$s" "$s" "$i"
    fi
    i=$((i+1))
  done < "$OUT/generic.txt"
} > "$OUT/stub.S"
# laid out like a CANN install (<root>/latest/lib64), because the plugin derives the CANN root from where
# libascendcl.so was found and dlopens lib64/libascendcl.so, lib64/libacl_tdt_channel.so, ... below it
L=$OUT/latest/lib64
mkdir -p "$L/driver"
for so in $SONAMES libacl_op_compiler.so libacl_tdt_channel.so; do
  g++ -shared -fPIC -o "$L/$so" -Wl,-soname,"$so" "$OUT/stub.S" "$OUT/special.o"; done
ln -sf ../libascend_hal.so "$L/driver/libascend_hal.so"

echo "missing symbols: $(wc -l < "$OUT/missing.txt"); stub libraries: $SONAMES"
# mindspore.communication.init() imports the CANN python package "hccl" only to read its version
mkdir -p "$OUT/python/hccl"
: > "$OUT/python/hccl/__init__.py"
echo '__sys_version__ = "8.5.0"' > "$OUT/python/hccl/sys_version.py"
echo "run with: LD_LIBRARY_PATH=$OUT/latest/lib64 PYTHONPATH=$OUT/python"
touch "$OUT/.built"
