# shellcheck shell=bash
# Sourced by scripts/e2e-workload and scripts/trace-replay (not run): one
# run of a rota-synthtrain workload on a fresh dev cluster, with Rota or as
# plain Slurm, from the same sbatch lines.
#
# The caller sets REPO, TRAIN (bin/rota-synthtrain), TABLE (Gavel's
# table; JOB_TABLE, if set, the part of it the jobs read: rota-synthtrain
# workload --solo-table), SCALE (the jobs' --time-scale), HINT (all, v100, noisy or none:
# what each job tells with --rota-throughput; noisy: every type, each off
# by its own factor drawn log-uniformly from 0.5 to 2, from HINT_SEED,
# default 1, and the job's index: the same wrong hints on every run), the
# dev cluster's ROTA_DEV_*
# and SLURM_CONF, and defines die; TRAIN_FLAGS, if set, are more flags
# for every job's rota-synthtrain (e.g. --tick 2s).

# share_setup WHAT SHARDS: the runs offer GPUs as shards (SHARDS, as
# ROTA_DEV_SHARDS: TYPE:N[,TYPE:N...]) and every job may share one
# (SHARE_ARGS, read by run_job); WHAT is the setting that asked, for the
# error on a release that cannot (before 23.02 Slurm keeps a pending job's
# whole GPU when it is asked for shards).
share_setup() {
  local what=$1 rel
  rel=$("$REPO/scripts/slurm-version")
  awk -F. '{ exit !($1 > 23 || ($1 == 23 && $2 >= 2)) }' <<<"$rel" ||
    die "$what=on needs Slurm 23.02 or later (this is $rel): older Slurm keeps a pending job's whole GPU when asked for shards; run with ROTA_SLURM=24.11 or 26.05"
  export ROTA_DEV_SHARDS=$2
  SHARE_ARGS=(--rota-share=yes)
}

# run_up MODE DIR: a fresh dev cluster for one run whose files go under DIR
# (DIR/logs, DIR/ckpt, DIR/jobs made empty). MODE rota: job_submit plugin
# and controller, and it returns once the plugin reaches the controller
# (a submission is placed, as a user would see it); share: rota with the
# controller's space sharing on; plain: no job_submit plugin, no
# controller. The cluster's log is DIR/cluster.log.
run_up() {
  local mode=$1 dir=$2 id ok=""
  rm -rf "$dir" "$ROTA_DEV_DIR/state" "$ROTA_DEV_DIR/controller"
  mkdir -p "$dir/logs" "$dir/ckpt" "$dir/jobs"
  chmod -R 0777 "$dir"
  "$REPO/scripts/dev-cluster" down >/dev/null 2>&1 || true
  if [[ $mode == rota || $mode == share ]]; then
    local sharing=false
    [[ $mode == share ]] && sharing=true
    ROTA_DEV_SPACE_SHARING=$sharing "$REPO/scripts/dev-cluster" up >"$dir/cluster.log" 2>&1 || { cat "$dir/cluster.log"; die "dev-cluster up failed"; }
    ROTA_DEV_SPACE_SHARING=$sharing "$REPO/scripts/dev-cluster" controller start >>"$dir/cluster.log" 2>&1 || die "controller start failed"
    for _ in $(seq 1 100); do
      id=$(sbatch --parsable -H -o /dev/null --gres=gpu:1 --wrap true)
      if scontrol show job "$id" | grep -q 'AdminComment=rota:'; then ok=1; fi
      scancel "$id"
      [[ -n $ok ]] && break
      sleep 0.3
    done
    [[ -n $ok ]] || die "the plugin never reached the controller"
  else
    ROTA_DEV_SUBMIT_PLUGIN=off "$REPO/scripts/dev-cluster" up >"$dir/cluster.log" 2>&1 || { cat "$dir/cluster.log"; die "dev-cluster up failed"; }
  fi
}

# run_job DIR I STEPS SV SP SK MODEL: writes the batch script DIR/jobs/I.sh
# of workload line I and sets JOB_ARGS to its sbatch arguments (the
# script last): named after what it trains, as people name their jobs
# (the estimators learn from jobs of the same name), no GPU type, a
# generous --time, --requeue, the checkpoint signal, its steps and, by
# HINT, its steps/s. Plain Slurm ignores the --rota-* options.
run_job() {
  local dir=$1 i=$2 steps=$3 sv=$4 sp=$5 sk=$6 model=$7 name
  # With SHARE_ARGS a job on shards finds the jobs on its GPU in
  # DIR/share and trains at the speed Gavel's table measured beside them.
  local flags=${TRAIN_FLAGS:+ $TRAIN_FLAGS}
  [[ -n ${SHARE_ARGS[*]:-} ]] && flags+=" --share-dir $dir/share --pair-throughputs $TABLE"
  cat >"$dir/jobs/$i.sh" <<EOF
#!/bin/bash
exec $TRAIN --model '$model' --steps $steps --time-scale $SCALE --throughputs ${JOB_TABLE:-$TABLE} --ckpt-dir $dir/ckpt --log $dir/logs/\$SLURM_JOB_ID.log$flags
EOF
  chmod 0755 "$dir/jobs/$i.sh"
  name=$(echo "$model" | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/-$//')
  local hint=()
  rate() { awk -v s="$steps" -v t="$1" 'BEGIN { printf "%.4g", s / t }'; }
  # noise K: job I's factor for type K (0, 1, 2), log-uniform in 0.5-2.
  noise() { awk -v seed="$(( ${HINT_SEED:-1} * 1000003 + i * 7 + $1 ))" 'BEGIN { srand(seed); rand(); printf "%.4f", 2 ^ (2 * rand() - 1) }'; }
  nrate() { awk -v s="$steps" -v t="$1" -v f="$2" 'BEGIN { printf "%.4g", s / t * f }'; }
  case $HINT in
    v100) hint=(--rota-throughput="v100:$(rate "$sv")") ;;
    all) hint=(--rota-throughput="v100:$(rate "$sv"),p100:$(rate "$sp"),k80:$(rate "$sk")") ;;
    noisy) hint=(--rota-throughput="v100:$(nrate "$sv" "$(noise 0)"),p100:$(nrate "$sp" "$(noise 1)"),k80:$(nrate "$sk" "$(noise 2)")") ;;
    none) ;;
    *) die "HINT=$HINT: want v100, all, noisy or none" ;;
  esac
  # SHARE_ARGS (share_setup): it may share a GPU, and says what it
  # trains, so that Rota knows its pairs.
  local share=()
  if [[ -n ${SHARE_ARGS[*]:-} ]]; then share=("${SHARE_ARGS[@]}" --rota-model="$model"); fi
  # shellcheck disable=SC2034 # read by the caller
  JOB_ARGS=(-J "$name" -o /dev/null -e "$dir/logs/$i.err" --requeue --time=02:00:00 --gres=gpu:1
    --rota-checkpoint-signal=USR1 --rota-steps="$steps" "${hint[@]}" "${share[@]}" "$dir/jobs/$i.sh")
}

# run_drain MODE DIR TIMEOUT: waits until the queue is empty (dies after
# TIMEOUT seconds, showing it), saves Rota's status with MODE rota, and
# writes DIR/summary.json from the jobs' logs and DIR/submits (a
# '<job id> <unix seconds>' line per sbatch).
run_drain() {
  local mode=$1 dir=$2 timeout=$3 start=$SECONDS
  while squeue -h -o %i | grep -q .; do
    (( SECONDS - start < timeout )) || { squeue | head -50; die "$mode: jobs still queued after ${timeout}s"; }
    sleep 2
  done
  if [[ $mode != plain ]]; then
    "$REPO/bin/rota" status --nats "nats://127.0.0.1:$ROTA_DEV_NATS_PORT" --json \
      >"$dir/status.json" 2>/dev/null || true
  fi
  "$TRAIN" summarize --log-dir "$dir/logs" --submit-times "$dir/submits" --json >"$dir/summary.json"
}
