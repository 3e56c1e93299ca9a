# frozen_string_literal: true

require "set"

# Checks what spec/apps/ordered_invariants.rb recorded against the guarantees of ordered jobs, given
# what was pushed (every id with versions 1..versions, each id's versions pushed in increasing order
# across perform_async calls), what sits in the morgue, and which process was killed when.
#
# - no overlap: no two runs of one id overlap in time (a run the kill cut short lasts until the kill);
# - order: each run sees an id's versions increasing, and each id's successful runs see them
#   increasing across runs; the one exception is the at-least-once rerun of a run the kill -9 ended
#   before its settle: a later run may repeat exactly that run's versions (then newer ones);
# - completeness: every pushed version was processed or sits in the morgue, not both, and no version
#   that was not pushed turned up;
# - every run finished, but those of the killed process.
class OrderedInvariantChecker
  Run = Struct.new(:token, :pid, :thread, :started, :ended, :ok, :seen, keyword_init: true)

  attr_reader :runs, :violations, :reruns

  # records: the parsed `inv:runs` list; morgue: {id => [versions]}.
  def initialize(records, ids:, versions:, morgue:, killed_pid:, killed_at:)
    @ids = ids
    @versions = (1..versions).to_a
    @morgue = morgue
    @killed_pid = killed_pid
    @killed_at = killed_at
    @runs = build(records)
    @violations = Hash.new { |h, k| h[k] = [] }
    @reruns = 0
  end

  def check
    by_id = Hash.new { |h, id| h[id] = [] }
    @runs.each { |run| run.seen.each_key { |id| by_id[id] << run } }
    unfinished
    by_id.each do |id, runs|
      runs.sort_by!(&:started)
      overlaps(id, runs)
      order(id, runs)
    end
    completeness(by_id)
    self
  end

  def ok? = @violations.values.all?(&:empty?)

  def failed_runs = @runs.count { |r| r.ok == false }

  def summary
    @violations.map { |kind, list| "#{kind}: #{list.size} (e.g. #{list.first(3).join("; ")})" }.join("\n")
  end

  private

  def build(records)
    ends = records.select { |r| r.key?("end") }.to_h { |r| [r["run"], r] }
    records.reject { |r| r.key?("end") }.map do |r|
      finish = ends[r["run"]]
      Run.new(token: r["run"], pid: r["pid"], thread: r["thread"], started: r["at"], ended: finish&.fetch("end"),
        ok: finish&.fetch("ok"), seen: r["seen"])
    end
  end

  def unfinished
    @runs.each do |run|
      next if run.ended || run.pid == @killed_pid

      @violations[:unfinished] << "run #{run.token} of #{run.seen.keys.join(",")} never ended"
    end
  end

  # A run cut short by the kill lasted until the kill.
  def finish_of(run)
    run.ended || (run.pid == @killed_pid ? @killed_at : Float::INFINITY)
  end

  def overlaps(id, runs)
    latest = nil
    runs.each do |run|
      if latest && run.started < finish_of(latest)
        @violations[:overlap] << "#{id}: #{latest.token} (#{latest.started}..#{finish_of(latest)}) and #{run.token} (from #{run.started})"
      end
      latest = run if latest.nil? || finish_of(run) > finish_of(latest)
    end
  end

  def order(id, runs)
    last = nil # the latest successful run
    runs.each do |run|
      seen = run.seen.fetch(id)
      @violations[:unsorted] << "#{id}: run #{run.token} saw #{seen.inspect}" unless seen.each_cons(2).all? { |a, b| a < b }
      next unless run.ok

      if last && seen.first <= last.seen.fetch(id).last
        if rerun_of_killed?(last, id, seen)
          @reruns += 1
        else
          @violations[:order] << "#{id}: run #{run.token} saw #{seen.inspect} after run #{last.token} saw #{last.seen.fetch(id).inspect}"
        end
      end
      last = run
    end
  end

  def rerun_of_killed?(previous, id, seen)
    before = previous.seen.fetch(id)
    previous.pid == @killed_pid && previous.started < @killed_at && seen.first(before.size) == before
  end

  def completeness(by_id)
    (by_id.keys - @ids).each { |id| @violations[:unknown] << "#{id} was never pushed" }
    @ids.each do |id|
      processed = by_id[id].select(&:ok).flat_map { |run| run.seen.fetch(id) }.to_set
      dead = @morgue.fetch(id, []).to_set
      missing = @versions.to_set - processed - dead
      @violations[:missing] << "#{id}: #{missing.to_a.sort.inspect}" if missing.any?
      @violations[:processed_and_in_morgue] << "#{id}: #{(processed & dead).to_a.sort.inspect}" if (processed & dead).any?
      extra = (processed | dead) - @versions.to_set
      @violations[:unknown] << "#{id}: #{extra.to_a.inspect}" if extra.any?
    end
  end
end
