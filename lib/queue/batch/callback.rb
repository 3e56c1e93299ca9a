# frozen_string_literal: true

module JobQueue
  class Batch
    # The job a batch's transition pushes (from the engine's script) onto its callback queue: runs
    # every callback registered for the event, `Target.new.on_<event>(status, options)` or the
    # method named by "Class#method". A callback that raises fails this job, which retries as any
    # job does; its acknowledgement is what marks the event's callbacks as run (a parent batch and
    # `success` wait for that).
    class Callback
      include JobQueue::Worker

      def perform(event, bid)
        status = Status.new(bid)
        (status.callbacks[event] || []).each do |target, options|
          name, method = target.split("#", 2)
          Object.const_get(name).new.public_send(method || "on_#{event}", status, options)
        end
      end
    end
  end
end
