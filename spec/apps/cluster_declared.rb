# frozen_string_literal: true

# Declared queues for `queue cluster` group specs (spec/api/cluster_cli_spec.rb): two in the cronjob
# namespace, one plain, one weighted.
require "queue"
require "queue/gitlab"

class ClusterImportWorker
  include ApplicationWorker

  queue_namespace :cronjob

  def perform; end
end

class ClusterCleanupWorker
  include ApplicationWorker

  queue_namespace :cronjob

  def perform; end
end

class ClusterMailerWorker
  include ApplicationWorker

  weight 2

  def perform; end
end
