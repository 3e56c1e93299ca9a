# frozen_string_literal: true

module JobQueue
  # A job in the scheduled, retry or dead set (Sidekiq's `SortedEntry`): a JobRecord with its score
  # (run-at or death time) and the actions of the dashboard's buttons. Each action is one atomic step in
  # the engine: the job leaves the set only as it reaches its queue (or the dead set), and only if it
  # was still there.
  class SortedEntry < JobRecord
    attr_reader :score, :parent

    def initialize(parent, score, item)
      super(item)
      @score = score
      @parent = parent
    end

    def at = Time.at(score).utc

    def error? = !!item["error_class"]

    # Removes the job from its set. Whether it was there.
    def delete
      if @value
        @parent.delete_by_value(@parent.name, @value)
      else
        @parent.delete_by_jid(score, jid)
      end
    end

    # Moves the job to time `at` in its set.
    def reschedule(at) = @parent.engine.api_set_reschedule(@parent.name, raw, at.to_f)

    # Pushes the job to its queue now (`enqueued_at` set), out of the set.
    def add_to_queue = act("add_to_queue")

    # Pushes the job to its queue now with one retry given back (`retry_count` - 1), as Sidekiq does.
    def retry = act("retry")

    # Moves the job to the dead set and runs the death handlers (`JobQueue.configure { |c|
    # c.death_handlers << … }`) with a "Job killed by API" error.
    def kill
      moved = act("kill")
      DeadSet.notify_death(item) if moved
      moved
    end

    private

    def raw = @value.is_a?(String) ? @value : JSON.generate(@item)

    def act(action) = @parent.engine.api_set_act(@parent.name, action, raw, score.to_f, jid.to_s)
  end
end
