# frozen_string_literal: true

module JobQueue
  module RailsIntegration
    # JobQueue::Ordered.loader in a Rails app. Ordered workers are found among the modules loaded in
    # the process; where the app is not eager-loaded (development, a console, a runner, the dashboard
    # in `bin/rails s`) that would be whichever of them autoloading happened to load. So the first
    # listing eager-loads the app, and the first listing after each code reload does it again.
    class EagerLoader
      def initialize(app)
        @app = app
        @loaded = false
        loader = self # the callback runs with the reloader as self
        app.reloader.to_prepare { loader.reset }
      end

      def call
        return if @loaded

        @app.eager_load!
        @loaded = true
      end

      # Code was reloaded: the next listing eager-loads again.
      def reset
        @loaded = false
      end
    end
  end
end
