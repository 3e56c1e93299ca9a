# frozen_string_literal: true

module JobQueue
  # Base of every error the gem raises (besides ArgumentError for bad input).
  class Error < StandardError; end

  # Redis cannot be reached, or the connection broke.
  class ConnectionError < Error; end

  # Redis answered with an error.
  class RedisError < Error; end

  # A push reached the master, but fewer replicas than `config.redis[:wait_replicas]` acknowledged it
  # within `wait_timeout:`. The job may still run, or be lost if the master fails over; it was not
  # pushed again (pushing it again could run it twice). The message names the replicas wanted, the
  # count reached and the timeout.
  class ReplicationError < RedisError; end

  # Job data found in Redis is not a job (it is sent to the dead set).
  class InvalidJob < Error; end

  # Raised inside a job thread that is still running when the shutdown timeout runs out. The job is
  # already back in its queue; do not rescue it.
  class Shutdown < Interrupt; end
end
