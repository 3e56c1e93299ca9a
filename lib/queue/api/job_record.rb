# frozen_string_literal: true

require "base64"
require "zlib"

module JobQueue
  # One job as stored in Redis (Sidekiq's `JobRecord`): the parsed hash (`item`), the JSON it was read
  # from (`value`) and its queue. Read-only but for `delete` (from its queue).
  class JobRecord
    # ActiveJob's wrapper class, as Sidekiq's adapter and ours both write it (Sidekiq 8's adapter: its
    # own Sidekiq::ActiveJob::Wrapper).
    ACTIVE_JOB_WRAPPERS = %w[ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper Sidekiq::ActiveJob::Wrapper].freeze
    MAILER_JOBS = %w[ActionMailer::DeliveryJob ActionMailer::MailDeliveryJob].freeze

    attr_reader :item, :value, :queue

    # `shard:` the shard whose queue holds the job (a job read from a queue; nil means "main").
    def initialize(item, queue_name = nil, shard: nil)
      @shard = shard
      @args = nil
      @value = item
      @item = item.is_a?(Hash) ? item : parse(item)
      @queue = queue_name || @item["queue"]
    end

    def [](name) = @item[name]

    def klass = self["class"]

    def jid = self["jid"]

    # The job's arguments (for a value that is not JSON, the value itself, as Sidekiq shows it).
    def args = @args || @item["args"]

    def tags = self["tags"] || []

    def error_message = self["error_message"]

    def error_class = self["error_class"]

    # The job's times as UTC Times, from float epoch seconds or Sidekiq 8's integer milliseconds
    # (JobQueue::Timestamp); nil when the job has none.
    def enqueued_at = Timestamp.time(self["enqueued_at"])

    def created_at = Timestamp.time(self["created_at"] || self["enqueued_at"] || 0)

    def failed_at = Timestamp.time(self["failed_at"])

    def retried_at = Timestamp.time(self["retried_at"])

    # Seconds since the job was queued.
    def latency
      now = Time.now.to_f
      now - (Timestamp.seconds(@item["enqueued_at"] || @item["created_at"]) || now)
    end

    # The class a person would name: an ActiveJob's own class, a mailer's "Mailer#method".
    def display_class
      @display_class ||= self["display_class"] || active_job_class || klass
    end

    def display_args
      @display_args ||= if active_job?
        job_args = self["wrapped"] ? args[0]["arguments"] : []
        case self["wrapped"] || args[0]
        when "ActionMailer::DeliveryJob" then job_args.drop(3)
        when "ActionMailer::MailDeliveryJob" then job_args.drop(3).first["args"]
        else job_args
        end
      elsif self["encrypt"]
        args[0..-2] + ["[encrypted data]"]
      else
        args
      end
    end

    # The backtrace lines kept with a failure (`backtrace: true` or N), decoded.
    def error_backtrace
      return @error_backtrace if defined?(@error_backtrace)

      value = self["error_backtrace"]
      @error_backtrace = value && decode_backtrace(value)
    end

    # Removes this job from its queue. Whether it was still there.
    def delete = API.engine(@shard).api_queue_delete(@queue.to_s, @value.is_a?(String) ? @value : JSON.generate(@item))

    def inspect = "#<#{self.class.name} #{klass} jid=#{jid} queue=#{queue}>"

    private

    def parse(json)
      JSON.parse(json)
    rescue JSON::ParserError
      @args = [json]
      {}
    end

    def active_job? = ACTIVE_JOB_WRAPPERS.include?(klass)

    def active_job_class
      return unless active_job?

      job_class = @item["wrapped"] || args[0]
      MAILER_JOBS.include?(job_class) ? args[0]["arguments"][0..1].join("#") : job_class
    end

    def decode_backtrace(value)
      return value if value.is_a?(Array)

      JSON.parse(Zlib::Inflate.inflate(Base64.decode64(value)))
    end
  end
end
