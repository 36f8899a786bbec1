// Click-to-zoom for the book's figures (Jupyter Book loads every script of _static): a figure shrunk to the article's
// width opens over the page on a click (or Enter), as large as fits the window whole (never cut off), and closes on a
// click, Escape or Enter. The overlay
// exists only while open, outside the article, so the page's own layout (and tools/check_pages.py) never sees it.
document.addEventListener("DOMContentLoaded", () => {
  const open = (image) => {
    const overlay = document.createElement("div");
    overlay.className = "figure-zoom";
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-label", "Figure at full size: click or press Escape to close");
    overlay.tabIndex = -1;
    const large = document.createElement("img");
    large.src = image.currentSrc || image.src;
    large.alt = image.alt;
    // the largest size that fits the window in both directions, up to twice the figure's own pixels
    const scale = Math.min(
      (0.96 * window.innerWidth) / image.naturalWidth,
      (0.94 * window.innerHeight) / image.naturalHeight,
      2,
    );
    large.style.width = `${Math.round(scale * image.naturalWidth)}px`;
    overlay.appendChild(large);
    const close = () => { overlay.remove(); image.focus(); };
    overlay.addEventListener("click", close);
    overlay.addEventListener("keydown", (event) => {
      if (["Escape", "Enter", " "].includes(event.key)) { event.preventDefault(); close(); }
    });
    document.body.appendChild(overlay);
    overlay.focus();
  };
  for (const image of document.querySelectorAll("article figure img")) {
    image.classList.add("zoomable");
    image.tabIndex = 0;
    image.setAttribute("role", "button");
    image.title = "Click to see the figure at full size";
    image.addEventListener("click", () => open(image));
    image.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); open(image); }
    });
  }
});
