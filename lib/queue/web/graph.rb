# frozen_string_literal: true

module JobQueue
  class Web
    # The history graph as inline SVG (no script): processed and failed per day (or per sample),
    # oldest on the left, drawn as bars scaled to the largest value, each with a tooltip.
    class Graph
      WIDTH = 720
      HEIGHT = 200
      PAD_LEFT = 48
      PAD_BOTTOM = 22

      # series: {"processed" => [[label, count], …], "failed" => [[label, count], …]}, same labels.
      def initialize(series, unit: "day")
        @labels = series.fetch("processed").map(&:first)
        @processed = series.fetch("processed").map(&:last).map(&:to_i)
        @failed = series.fetch("failed").map(&:last).map(&:to_i)
        @unit = unit
      end

      def to_svg
        max = nice_max([*@processed, *@failed, 1].max)
        n = [@labels.size, 1].max
        plot_w = WIDTH - PAD_LEFT - 4
        plot_h = HEIGHT - PAD_BOTTOM - 8
        step = plot_w.to_f / n
        bar = [step * 0.42, 1].max
        out = [%(<svg class="graph" viewBox="0 0 #{WIDTH} #{HEIGHT}" role="img" aria-label="processed and failed per #{@unit}" preserveAspectRatio="none">)]
        [0, 0.5, 1].each do |f|
          y = (8 + plot_h * (1 - f)).round(1)
          out << %(<line class="grid" x1="#{PAD_LEFT}" x2="#{WIDTH - 4}" y1="#{y}" y2="#{y}"/>)
          out << %(<text class="axis" x="#{PAD_LEFT - 6}" y="#{y + 4}" text-anchor="end">#{short((max * f).round)}</text>)
        end
        @labels.each_with_index do |label, i|
          x = PAD_LEFT + i * step + step * 0.08
          [[@processed[i], "processed", 0], [@failed[i], "failed", bar]].each do |value, css, dx|
            hgt = (plot_h * value / max.to_f).round(1)
            out << %(<rect class="#{css}" x="#{(x + dx).round(1)}" y="#{(8 + plot_h - hgt).round(1)}" width="#{bar.round(1)}" height="#{hgt}">) +
              %(<title>#{CGI.escapeHTML(label.to_s)}: #{value} #{css}</title></rect>)
          end
        end
        [0, @labels.size - 1].uniq.each do |i|
          next if @labels.empty?

          anchor = i.zero? ? "start" : "end"
          x = i.zero? ? PAD_LEFT : WIDTH - 4
          out << %(<text class="axis" x="#{x}" y="#{HEIGHT - 6}" text-anchor="#{anchor}">#{CGI.escapeHTML(@labels[i].to_s)}</text>)
        end
        out << "</svg>"
        SafeString.new(out.join)
      end

      private

      def nice_max(value)
        magnitude = 10**Math.log10(value).floor
        [1, 2, 2.5, 5, 10].map { |m| m * magnitude }.find { |v| v >= value }.ceil
      end

      def short(n)
        return "#{(n / 1_000_000.0).round(1)}M" if n >= 1_000_000
        return "#{(n / 1000.0).round(1)}k" if n >= 10_000

        n.to_s
      end
    end
  end
end
